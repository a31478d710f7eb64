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
// not mean exactly one thing, or nil. It makes a few passes over the bytes
// (UTF-8, syntax, surrogates, then one walk) without building values.
func checkStrict(body []byte) error {
	if !utf8.Valid(body) {
		return errors.New("the body is not valid UTF-8")
	}
	if !json.Valid(body) {
		var v json.RawMessage
		return notJSON(json.Unmarshal(body, &v))
	}
	if err := checkSurrogates(body); err != nil {
		return err
	}
	sc := strictScanner{body: body}
	_, err := sc.value(sc.skip(0), requestSchema, 0)
	return err
}

// strictScanner walks JSON that json.Valid accepted, so it needs no syntax
// checks of its own. It allocates only for escaped member names and for
// messages; path holds the member names above the current value.
type strictScanner struct {
	body []byte
	path [][]byte
}

func (sc *strictScanner) skip(i int) int {
	for i < len(sc.body) && (sc.body[i] == ' ' || sc.body[i] == '\t' || sc.body[i] == '\n' || sc.body[i] == '\r') {
		i++
	}
	return i
}

// str returns the end of the string starting at i (at its quote) and its
// value: the raw bytes, or a decoded copy when it has escapes.
func (sc *strictScanner) str(i int) (int, []byte) {
	start, escaped := i, false
	for i++; sc.body[i] != '"'; i++ {
		if sc.body[i] == '\\' {
			escaped = true
			i++
		}
	}
	i++
	if !escaped {
		return i, sc.body[start+1 : i-1]
	}
	var v string
	_ = json.Unmarshal(sc.body[start:i], &v) // valid JSON: cannot fail
	return i, []byte(v)
}

// value checks the value at i and returns the index after it.
func (sc *strictScanner) value(i int, sch schema, depth int) (int, error) {
	switch c := sc.body[i]; {
	case c == '"':
		i, _ = sc.str(i)
		return i, nil
	case c == '[' || c == '{':
		if depth >= maxStrictDepth {
			return 0, fmt.Errorf("%s nests deeper than %d levels", sc.where(), maxStrictDepth)
		}
		if c == '[' {
			return sc.array(i, depth)
		}
		return sc.object(i, sch, depth)
	case c == 't' || c == 'n':
		return i + 4, nil
	case c == 'f':
		return i + 5, nil
	}
	start := i
	for i < len(sc.body) && strings.IndexByte("+-0123456789.eE", sc.body[i]) >= 0 {
		i++
	}
	if lit := sc.body[start:i]; !exactNumber(string(lit)) {
		return 0, fmt.Errorf("%s is the number %s, which changes value as JSON canonicalises it (more than 15 significant digits or out of range); send it as a decimal string", sc.where(), truncate(string(lit)))
	}
	return i, nil
}

func (sc *strictScanner) array(i, depth int) (int, error) {
	i = sc.skip(i + 1)
	for n := 0; sc.body[i] != ']'; n++ {
		sc.path = append(sc.path, []byte("["+strconv.Itoa(n)+"]"))
		var err error
		if i, err = sc.value(i, nil, depth+1); err != nil {
			return 0, err
		}
		sc.path = sc.path[:len(sc.path)-1]
		if i = sc.skip(i); sc.body[i] == ',' {
			i = sc.skip(i + 1)
		}
	}
	return i + 1, nil
}

func (sc *strictScanner) object(i int, sch schema, depth int) (int, error) {
	var small [16][]byte // names, searched linearly while they fit
	names := small[:0]
	var seen map[string]bool // once an object is too large to search
	i = sc.skip(i + 1)
	for sc.body[i] != '}' {
		var name []byte
		i, name = sc.str(i)
		dup := false
		if seen == nil {
			for _, n := range names {
				dup = dup || bytes.Equal(n, name)
			}
			if len(names) < len(small) {
				names = append(names, name)
			} else {
				seen = map[string]bool{}
				for _, n := range names {
					seen[string(n)] = true
				}
			}
		}
		if seen != nil {
			dup = dup || seen[string(name)]
			seen[string(name)] = true
		}
		if dup {
			return 0, fmt.Errorf("%s has the member %q twice", sc.where(), truncate(string(name)))
		}
		child, known := sch[string(name)]
		if !known && sch != nil {
			for want := range sch {
				if strings.EqualFold(string(name), want) {
					return 0, fmt.Errorf("%s has the member %q; member names are case-sensitive, it is %q", sc.where(), truncate(string(name)), want)
				}
			}
		}
		i = sc.skip(sc.skip(i) + 1) // the colon
		sc.path = append(sc.path, name)
		var err error
		if i, err = sc.value(i, child, depth+1); err != nil {
			return 0, err
		}
		sc.path = sc.path[:len(sc.path)-1]
		if i = sc.skip(i); sc.body[i] == ',' {
			i = sc.skip(i + 1)
		}
	}
	return i + 1, nil
}

func (sc *strictScanner) where() string {
	if len(sc.path) == 0 {
		return "the body"
	}
	return truncate(strings.ReplaceAll(string(bytes.Join(sc.path, []byte("."))), ".[", "["))
}

func notJSON(err error) error {
	if err == nil || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected end of JSON input") {
		return errors.New("the body is not an x402 request: the JSON ends early")
	}
	return fmt.Errorf("the body is not an x402 request: %v", err)
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
