package registry

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ardx-dev/ardx/index"
)

// The GET /agents filter language (ARD Appendix A, the subset this registry
// supports):
//
//	filter     = comparison { "AND" comparison }
//	comparison = field ( "=" | ":" | ">" ) value { "," value }
//	field      = "displayName" | "type" | "publisherId" | "createdAfter" | "updatedAfter"
//	value      = quoted | bare
//	quoted     = '"' { char | '\"' | '\\' } '"' | "'" { char | "\'" | '\\' } "'"
//	bare       = 1*( any char except space, comma, quotes )
//
// Commas are OR within a field; AND joins fields (case-insensitive keyword).
// displayName matches a case-insensitive substring; type and publisherId
// match exactly; createdAfter and updatedAfter take one RFC 3339 time or
// date (midnight UTC), with ">" as well (the ARD example's form).
// Errors name the character offset and what was expected there.

const (
	maxAgentsFilterLen  = 2048
	maxAgentsFilterVals = 50
)

// filterError is a malformed filter or orderBy, with where it went wrong.
type filterError struct {
	Offset int
	Msg    string
}

func (e *filterError) Error() string {
	return fmt.Sprintf("at offset %d: %s", e.Offset, e.Msg)
}

type filterScanner struct {
	src string
	pos int
}

func (sc *filterScanner) skipSpace() {
	for sc.pos < len(sc.src) && (sc.src[sc.pos] == ' ' || sc.src[sc.pos] == '\t') {
		sc.pos++
	}
}

func (sc *filterScanner) errorf(format string, args ...any) *filterError {
	return &filterError{Offset: sc.pos, Msg: fmt.Sprintf(format, args...)}
}

// found describes what is at the current position, for error messages.
func (sc *filterScanner) found() string {
	if sc.pos >= len(sc.src) {
		return "end of filter"
	}
	end := sc.pos
	for end < len(sc.src) && end-sc.pos < 16 && sc.src[end] != ' ' {
		end++
	}
	if end == sc.pos {
		end++
	}
	return strconv.Quote(sc.src[sc.pos:end])
}

func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// ident reads a run of letters, digits and underscores.
func (sc *filterScanner) ident() string {
	start := sc.pos
	for sc.pos < len(sc.src) && isIdentByte(sc.src[sc.pos]) {
		sc.pos++
	}
	return sc.src[start:sc.pos]
}

// value reads a quoted or bare value.
func (sc *filterScanner) value() (string, *filterError) {
	if sc.pos >= len(sc.src) {
		return "", sc.errorf("expected a value, found end of filter")
	}
	if q := sc.src[sc.pos]; q == '"' || q == '\'' {
		start := sc.pos
		var b strings.Builder
		for i := sc.pos + 1; i < len(sc.src); i++ {
			switch c := sc.src[i]; c {
			case '\\':
				if i+1 < len(sc.src) && (sc.src[i+1] == q || sc.src[i+1] == '\\') {
					b.WriteByte(sc.src[i+1])
					i++
					continue
				}
				sc.pos = i
				return "", sc.errorf(`expected %c or \\ after a backslash in a quoted value`, q)
			case q:
				if b.Len() == 0 {
					return "", sc.errorf("expected a value, found an empty quoted value")
				}
				sc.pos = i + 1
				return b.String(), nil
			default:
				b.WriteByte(c)
			}
		}
		sc.pos = start
		return "", sc.errorf("quoted value is not closed: expected a closing %c", q)
	}
	start := sc.pos
	for sc.pos < len(sc.src) {
		c := sc.src[sc.pos]
		if c == ' ' || c == '\t' || c == ',' || c == '"' || c == '\'' {
			break
		}
		sc.pos++
	}
	if sc.pos == start {
		return "", sc.errorf("expected a value, found %s", sc.found())
	}
	return sc.src[start:sc.pos], nil
}

var agentsFilterFields = []string{"displayName", "type", "publisherId", "createdAfter", "updatedAfter"}

// parseAgentsFilter parses a GET /agents filter into the listing request
// fields it sets.
func parseAgentsFilter(src string, req *index.ListRequest) *filterError {
	if len(src) > maxAgentsFilterLen {
		return &filterError{Offset: maxAgentsFilterLen, Msg: "filter is longer than " + strconv.Itoa(maxAgentsFilterLen) + " bytes"}
	}
	sc := &filterScanner{src: src}
	sc.skipSpace()
	if sc.pos == len(src) {
		return nil // an empty filter matches everything
	}
	seen := map[string]bool{}
	for {
		sc.skipSpace()
		fieldPos := sc.pos
		field := sc.ident()
		switch field {
		case "":
			return sc.errorf("expected a field name (%s), found %s", strings.Join(agentsFilterFields, ", "), sc.found())
		case "displayName", "type", "publisherId", "createdAfter", "updatedAfter":
		default:
			sc.pos = fieldPos
			return sc.errorf("unknown field %q: expected one of %s", field, strings.Join(agentsFilterFields, ", "))
		}
		if seen[field] {
			sc.pos = fieldPos
			return sc.errorf("field %s appears twice; list alternatives with commas (%s=\"a\",\"b\")", field, field)
		}
		seen[field] = true
		sc.skipSpace()
		after := field == "createdAfter" || field == "updatedAfter"
		if sc.pos >= len(src) || (src[sc.pos] != '=' && src[sc.pos] != ':' && !(after && src[sc.pos] == '>')) {
			if after {
				return sc.errorf("expected '=', ':' or '>' after %s, found %s", field, sc.found())
			}
			return sc.errorf("expected '=' or ':' after %s, found %s", field, sc.found())
		}
		sc.pos++
		sc.skipSpace()
		var vals []string
		for {
			valPos := sc.pos
			v, err := sc.value()
			if err != nil {
				return err
			}
			if len(vals) == maxAgentsFilterVals {
				sc.pos = valPos
				return sc.errorf("more than %d values for %s", maxAgentsFilterVals, field)
			}
			vals = append(vals, v)
			sc.skipSpace()
			if sc.pos < len(src) && src[sc.pos] == ',' {
				sc.pos++
				sc.skipSpace()
				continue
			}
			if (field == "createdAfter" || field == "updatedAfter") && len(vals) > 1 {
				sc.pos = valPos
				return sc.errorf("%s takes one time, not a list", field)
			}
			if err := applyAgentsFilter(req, field, vals); err != nil {
				sc.pos = valPos
				return sc.errorf("%s", err.Error())
			}
			break
		}
		if sc.pos == len(src) {
			return nil
		}
		kwPos := sc.pos
		if kw := sc.ident(); !strings.EqualFold(kw, "AND") {
			sc.pos = kwPos
			return sc.errorf("expected AND, a comma or the end of the filter, found %s", sc.found())
		}
		if sc.pos < len(src) && src[sc.pos] != ' ' && src[sc.pos] != '\t' {
			sc.pos = kwPos
			return sc.errorf("expected AND followed by a space, found %s", sc.found())
		}
	}
}

func applyAgentsFilter(req *index.ListRequest, field string, vals []string) error {
	switch field {
	case "displayName":
		req.DisplayName = vals
	case "type":
		req.Types = vals
	case "publisherId":
		req.Publishers = vals
	case "createdAfter", "updatedAfter":
		t, err := time.Parse(time.RFC3339, vals[0])
		if err != nil {
			t, err = time.Parse(time.DateOnly, vals[0])
		}
		if err != nil {
			return fmt.Errorf("expected an RFC 3339 time such as 2026-01-01T00:00:00Z, or a date, for %s, found %q", field, vals[0])
		}
		if field == "createdAfter" {
			req.CreatedAfter = t
		} else {
			req.UpdatedAfter = t
		}
	}
	return nil
}

var agentsOrderFields = []string{"displayName", "updatedAt", "createdAt", "identifier"}

// parseOrderBy parses "field [ASC|DESC], ...".
func parseOrderBy(src string) ([]index.Order, *filterError) {
	if len(src) > 256 {
		return nil, &filterError{Offset: 256, Msg: "orderBy is longer than 256 bytes"}
	}
	sc := &filterScanner{src: src}
	sc.skipSpace()
	if sc.pos == len(src) {
		return nil, nil
	}
	var out []index.Order
	seen := map[string]bool{}
	for {
		sc.skipSpace()
		fieldPos := sc.pos
		field := sc.ident()
		switch field {
		case "displayName", "updatedAt", "createdAt", "identifier":
		case "":
			return nil, sc.errorf("expected a field name (%s), found %s", strings.Join(agentsOrderFields, ", "), sc.found())
		default:
			sc.pos = fieldPos
			return nil, sc.errorf("unknown field %q: expected one of %s", field, strings.Join(agentsOrderFields, ", "))
		}
		if seen[field] {
			sc.pos = fieldPos
			return nil, sc.errorf("field %s appears twice", field)
		}
		seen[field] = true
		o := index.Order{Field: field}
		sc.skipSpace()
		dirPos := sc.pos
		switch dir := sc.ident(); {
		case dir == "":
		case strings.EqualFold(dir, "ASC"):
		case strings.EqualFold(dir, "DESC"):
			o.Desc = true
		default:
			sc.pos = dirPos
			return nil, sc.errorf("expected ASC, DESC, a comma or the end, found %s", sc.found())
		}
		out = append(out, o)
		sc.skipSpace()
		if sc.pos == len(src) {
			return out, nil
		}
		if src[sc.pos] != ',' {
			return nil, sc.errorf("expected a comma or the end, found %s", sc.found())
		}
		sc.pos++
	}
}
