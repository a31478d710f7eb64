package registry

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/web"
)

// Request bodies are decoded member by member from a map of raw values so
// that every problem names the member at fault (query.filter.tags, not
// "json: cannot unmarshal"), unknown members are reported instead of being
// silently dropped, and a request collects all its field errors at once.

// Limits on what a request may ask for; each keeps a hostile body from
// costing more than a normal one.
const (
	maxTextLen        = 1024
	maxFilterKeys     = 32
	maxFilterValues   = 100
	maxFilterValueLen = 512
)

// fieldErrors collects validation failures of one request.
type fieldErrors []web.FieldError

func (fe *fieldErrors) add(field, msg string) {
	*fe = append(*fe, web.FieldError{Field: field, Message: msg})
}

// onlyMembers reports each member of m that is not in allowed, in key
// order, as not a member of what (e.g. "a search request"); prefix names
// the object's path ("query.").
func (fe *fieldErrors) onlyMembers(m map[string]json.RawMessage, prefix, what string, allowed ...string) {
	unknownKeys(fe, m, prefix, "is not a member of "+what, allowed)
}

// onlyParams applies the one rule every GET route has for its query: a
// parameter not in allowed, given more than once, or given with an empty
// value is refused (422), never ignored, so a caller never mistakes an
// unfiltered answer for a filtered one. what names the route ("GET /tools").
func (fe *fieldErrors) onlyParams(q url.Values, what string, allowed ...string) {
	unknownKeys(fe, q, "", "is not a parameter of "+what, allowed)
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(allowed, k) {
			continue
		}
		switch v := q[k]; {
		case len(v) > 1:
			fe.add(k, "is given more than once")
		case v[0] == "":
			fe.add(k, "is empty; leave the parameter out for its default")
		}
	}
}

func unknownKeys[V any](fe *fieldErrors, m map[string]V, prefix, isNot string, allowed []string) {
	unknown := false
	for k := range m {
		if !slices.Contains(allowed, k) {
			unknown = true
			break
		}
	}
	if !unknown { // the usual case: no sorted copy of the keys to make
		return
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(allowed, k) {
			fe.add(prefix+k, isNot+" ("+strings.Join(allowed, ", ")+")")
		}
	}
}

// problem turns the collected errors into one 422 problem, or nil.
func (fe fieldErrors) problem(ps web.Problems) *web.Problem {
	if len(fe) == 0 {
		return nil
	}
	detail := fe[0].Field + ": " + fe[0].Message
	if fe[0].Field == "" {
		detail = fe[0].Message
	}
	if len(fe) > 1 {
		detail += " (and " + strconv.Itoa(len(fe)-1) + " more; see errors)"
	}
	return ps.Invalid(detail, fe...)
}

// readObject reads the request body (413 past the limit) and splits a JSON
// object into its members. Bytes that are not JSON are a 400; JSON that is
// not an object is a 422. An empty body is an empty object.
func readObject(w http.ResponseWriter, r *http.Request, ps web.Problems) (map[string]json.RawMessage, error) {
	body, err := web.ReadBody(w, r, maxBodyBytes)
	if err != nil {
		return nil, err
	}
	return splitObject(body, ps)
}

// splitObject is readObject past the read, shared with the fuzz targets.
func splitObject(body []byte, ps web.Problems) (map[string]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	if body[0] == '{' {
		// A body that opens an object decodes into members of any value,
		// so Unmarshal fails only where the JSON is malformed: one pass
		// checks and splits it.
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) == nil {
			return m, nil
		}
	} else if json.Valid(body) {
		return nil, ps.Invalid("the request body must be a JSON object",
			web.FieldError{Field: "", Message: "must be a JSON object"})
	}
	// Reuse the toolkit's wording (with the offset) for malformed JSON.
	var v any
	if err := web.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	return nil, ps.New(web.SlugBadRequest, "the request body is not valid JSON")
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// rawString decodes a JSON string member. A string of plain characters
// (no escape, quote or control character; valid UTF-8) is its bytes
// between the quotes; any other is left to encoding/json.
func rawString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	if s, ok := plainString(raw); ok {
		return s, true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// plainString is raw's text if raw is a JSON string of plain characters.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	ascii := true
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	if !ascii && !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// rawInt decodes a JSON integer member (1e2 and 2.0 are not integers here).
func rawInt(raw json.RawMessage) (int, bool) {
	n, err := strconv.ParseInt(string(raw), 10, 32)
	return int(n), err == nil
}

func rawObject(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	return m, json.Unmarshal(raw, &m) == nil
}

// queryModel is the query shared by search and explore (ADR-0005).
type queryModel struct {
	Text   string
	Filter index.Filter
}

// parseQuery decodes the "query" member. textRequired is set for search.
func parseQuery(raw json.RawMessage, textRequired bool, fe *fieldErrors) queryModel {
	var q queryModel
	if isNull(raw) {
		if textRequired {
			fe.add("query", "is required: an object with a non-empty text")
		}
		return q
	}
	m, ok := rawObject(raw)
	if !ok {
		fe.add("query", "must be an object")
		return q
	}
	fe.onlyMembers(m, "query.", "the query model", "text", "filter", "@context")
	if t, present := m["text"]; present && !isNull(t) {
		s, ok := rawString(t)
		switch {
		case !ok:
			fe.add("query.text", "must be a string")
		case strings.TrimSpace(s) == "" && textRequired:
			fe.add("query.text", "must not be empty")
		case len(s) > maxTextLen:
			fe.add("query.text", "must be at most "+strconv.Itoa(maxTextLen)+" bytes")
		default:
			q.Text = strings.TrimSpace(s)
		}
	} else if textRequired {
		fe.add("query.text", "is required")
	}
	if f, present := m["filter"]; present && !isNull(f) {
		q.Filter = parseFilter(f, fe)
	}
	return q
}

// parseFilter decodes query.filter: each value a string or an array of
// strings (a bare string is a one-element array, as ARD says).
func parseFilter(raw json.RawMessage, fe *fieldErrors) index.Filter {
	m, ok := rawObject(raw)
	if !ok {
		fe.add("query.filter", "must be an object mapping filter keys to a string or an array of strings")
		return nil
	}
	if len(m) > maxFilterKeys {
		fe.add("query.filter", "has more than "+strconv.Itoa(maxFilterKeys)+" keys")
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // errors come out in a stable order
	filter := make(index.Filter, len(m))
	for _, k := range keys {
		field := "query.filter." + k
		switch {
		case isPayKey(k):
			if vals, ok := parsePayFilter(k, m[k], field, fe); ok {
				filter[k] = vals
			}
			continue
		case !index.FilterKey(k):
			fe.add(field, "is not a supported filter key (type, tags, capabilities, publisher, version, metadata.<key>, trustManifest.attestations.type, trustManifest.identityType, pay:protocol, pay:network, pay:price, pay:verified, maxPricePerCall)")
			continue
		}
		v := m[k]
		var vals []string
		if s, ok := rawString(v); ok {
			vals = []string{s}
		} else if len(v) > 0 && v[0] == '[' {
			// Element by element: json would read a null as "".
			var elems []json.RawMessage
			if err := json.Unmarshal(v, &elems); err != nil {
				fe.add(field, "must be a string or an array of strings")
				continue
			}
			vals = make([]string, 0, len(elems))
			for _, e := range elems {
				s, ok := rawString(e)
				if !ok {
					vals = nil
					break
				}
				vals = append(vals, s)
			}
			if vals == nil {
				fe.add(field, "must be a string or an array of strings (no null)")
				continue
			}
		} else {
			fe.add(field, "must be a string or an array of strings")
			continue
		}
		switch {
		case len(vals) == 0:
			fe.add(field, "must hold at least one value")
			continue
		case len(vals) > maxFilterValues:
			fe.add(field, "must hold at most "+strconv.Itoa(maxFilterValues)+" values")
			continue
		}
		bad := false
		for _, s := range vals {
			if len(s) > maxFilterValueLen {
				fe.add(field, "values must be at most "+strconv.Itoa(maxFilterValueLen)+" bytes")
				bad = true
				break
			}
			if strings.TrimSpace(s) == "" {
				// An empty value would match nothing or everything; neither
				// is what a caller who wrote it meant.
				fe.add(field, "values must not be empty")
				bad = true
				break
			}
		}
		if !bad {
			filter[k] = vals
		}
	}
	return filter
}

// appendScope writes a canonical form of text and filter, for page-token
// scopes: length-prefixed so no two different queries share bytes.
func appendScope(dst []byte, text string, filter index.Filter) []byte {
	dst = appendLenString(dst, text)
	keys := make([]string, 0, len(filter))
	for k := range filter {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		dst = appendLenString(dst, k)
		vals := append([]string(nil), filter[k]...)
		sort.Strings(vals)
		dst = strconv.AppendInt(dst, int64(len(vals)), 10)
		for _, v := range vals {
			dst = appendLenString(dst, v)
		}
	}
	return dst
}

func appendLenString(dst []byte, s string) []byte {
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, ':')
	return append(dst, s...)
}
