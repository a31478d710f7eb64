package x402

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A /verify or /settle body must be JSON that means one thing to everyone
// who reads it: the settlement key is its RFC 8785 canonical form, and the
// merchant, the facilitator and any auditor must agree on what was paid. So
// before any member is read, checkStrict refuses what parsers disagree on:
// invalid UTF-8, lone UTF-16 surrogates, duplicate member names, member
// names of the x402 objects in another case (encoding/json would match them
// case-insensitively), and numbers that change value when canonicalised
// (integers above 2^53, over-precise decimals, overflow).

// schema names the members of one x402 object whose case is checked, and
// the schema of each member's value (nil: not checked below).
type schema map[string]schema

var (
	authorizationSchema = schema{"from": nil, "to": nil, "value": nil, "validAfter": nil, "validBefore": nil, "nonce": nil}
	exactPayloadSchema  = schema{"signature": nil, "authorization": authorizationSchema, "permit2Authorization": nil}
	requirementsSchema  = schema{
		"scheme": nil, "network": nil, "amount": nil, "maxAmountRequired": nil, "resource": nil,
		"description": nil, "mimeType": nil, "outputSchema": nil, "payTo": nil,
		"maxTimeoutSeconds": nil, "asset": nil, "extra": schema{"name": nil, "version": nil},
	}
	payloadSchema = schema{
		"x402Version": nil, "scheme": nil, "network": nil, "accepted": requirementsSchema,
		"payload": exactPayloadSchema, "resource": nil, "extensions": nil,
	}
	requestSchema = schema{"x402Version": nil, "paymentPayload": payloadSchema, "paymentRequirements": requirementsSchema}
)

// maxStrictDepth bounds nesting; encoding/json allows 10,000, far beyond any
// payment.
const maxStrictDepth = 64

// checkStrict returns a description of the first thing in body that does
// not mean exactly one thing, or nil.
func checkStrict(body []byte) error {
	if !utf8.Valid(body) {
		return errors.New("the body is not valid UTF-8")
	}
	if err := checkSurrogates(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := strictValue(dec, requestSchema, "", 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("the body has data after the JSON value")
	}
	return nil
}

// strictValue reads one value; sch checks member names when it is an object.
func strictValue(dec *json.Decoder, sch schema, path string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return notJSON(err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxStrictDepth {
			return fmt.Errorf("%s nests deeper than %d levels", where(path), maxStrictDepth)
		}
		if t == '[' {
			for i := 0; dec.More(); i++ {
				if err := strictValue(dec, nil, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
					return err
				}
			}
		} else {
			seen := map[string]bool{}
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					return notJSON(err)
				}
				name := tok.(string) // the decoder allows only strings here
				if seen[name] {
					return fmt.Errorf("%s has the member %q twice", where(path), truncate(name))
				}
				seen[name] = true
				child, known := sch[name]
				if !known && sch != nil {
					for want := range sch {
						if strings.EqualFold(name, want) {
							return fmt.Errorf("%s has the member %q; member names are case-sensitive, it is %q", where(path), truncate(name), want)
						}
					}
				}
				if err := strictValue(dec, child, join(path, name), depth+1); err != nil {
					return err
				}
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return notJSON(err)
		}
	case json.Number:
		if !exactNumber(string(t)) {
			return fmt.Errorf("%s is the number %s, which changes value as JSON canonicalises it (more than 15 significant digits or out of range); send it as a decimal string", where(path), truncate(string(t)))
		}
	}
	return nil
}

func notJSON(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return errors.New("the body is not an x402 request: the JSON ends early")
	}
	return fmt.Errorf("the body is not an x402 request: %v", err)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func where(path string) string {
	if path == "" {
		return "the body"
	}
	return truncate(path)
}

// exactNumber reports whether the JSON number lit keeps its value in the
// RFC 8785 form, which writes the nearest float64 the shortest way: two
// different numbers must never share a settlement key.
func exactNumber(lit string) bool {
	digits := strings.TrimPrefix(lit, "-")
	if len(digits) <= 15 && !strings.ContainsAny(digits, ".eE") {
		return true // an integer of at most 15 digits is exact in a float64
	}
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		// A huge exponent would make big.Rat build a huge number; nothing
		// that far from 1 survives as a float64 anyway (or it is zero,
		// which nobody writes that way).
		exp, err := strconv.Atoi(lit[i+1:])
		if err != nil || exp > 400 || exp < -400 {
			return false
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return false
	}
	sent, ok1 := new(big.Rat).SetString(lit)
	canon, ok2 := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	return ok1 && ok2 && sent.Cmp(canon) == 0
}

// checkSurrogates refuses a \u escape of a UTF-16 surrogate that is not a
// high one followed by a low one: decoders replace a lone one with U+FFFD,
// which would make two different bodies read alike. Backslashes occur only
// inside strings in JSON, so a scan of the raw bytes finds every escape
// (the decoder rejects a stray backslash elsewhere).
func checkSurrogates(body []byte) error {
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' || i+1 >= len(body) {
			continue
		}
		if body[i+1] != 'u' {
			i++ // skip the escaped character, which may be a backslash
			continue
		}
		r, ok := hex4(body, i+2)
		if !ok {
			continue // the decoder reports the bad escape
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Errorf("the body has a lone low surrogate \\u%04X", r)
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := rune(0), i+7 < len(body) && body[i+6] == '\\' && body[i+7] == 'u'
			if ok {
				lo, ok = hex4(body, i+8)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Errorf("the body has a lone high surrogate \\u%04X", r)
			}
			i += 11
		default:
			i += 5
		}
	}
	return nil
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(n), err == nil
}
