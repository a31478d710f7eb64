package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// Result bodies are assembled from the stored entry bytes: the registry's
// own members (score, source, visibility) are written first and the entry's
// members are copied after them, skipping representativeQueries (index
// input, not part of a result) and any stored member named like one of ours
// (see omitMember). No map is built and nothing is re-encoded, which keeps a page
// of results to a few copies.

var errNotObject = errors.New("registry: entry body is not a JSON object")

// projection says what to splice into an entry body.
type projection struct {
	score      int    // written when withScore
	withScore  bool   //
	source     []byte // JSON-encoded string; omitted when nil
	visibility string // "public" or "private"; omitted when empty
	keepRQ     bool   // keep representativeQueries (listing, not search)
}

// appendProjected appends body (a JSON object) to dst as described by p.
func appendProjected(dst, body []byte, p projection) ([]byte, error) {
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return dst, errNotObject
	}
	start := len(dst)
	dst = append(dst, '{')
	first := true
	if p.withScore {
		dst = append(dst, `"score":`...)
		dst = strconv.AppendInt(dst, int64(p.score), 10)
		first = false
	}
	if p.source != nil {
		if !first {
			dst = append(dst, ',')
		}
		dst = append(dst, `"source":`...)
		dst = append(dst, p.source...)
		first = false
	}
	if p.visibility != "" {
		if !first {
			dst = append(dst, ',')
		}
		dst = append(dst, `"visibility":"`...)
		dst = append(dst, p.visibility...)
		dst = append(dst, '"')
		first = false
	}
	i = skipWS(body, i+1)
	if i < len(body) && body[i] == '}' {
		return append(dst, '}'), nil
	}
	for {
		if i >= len(body) || body[i] != '"' {
			return dst[:start], errNotObject
		}
		keyStart := i
		keyEnd, ok := skipString(body, i)
		if !ok {
			return dst[:start], errNotObject
		}
		key := body[keyStart+1 : keyEnd-1]
		i = skipWS(body, keyEnd)
		if i >= len(body) || body[i] != ':' {
			return dst[:start], errNotObject
		}
		valStart := skipWS(body, i+1)
		valEnd, ok := skipValue(body, valStart)
		if !ok {
			return dst[:start], errNotObject
		}
		if !omitMember(key, p) {
			if !first {
				dst = append(dst, ',')
			}
			dst = append(dst, body[keyStart:keyEnd]...)
			dst = append(dst, ':')
			dst = append(dst, body[valStart:valEnd]...)
			first = false
		}
		i = skipWS(body, valEnd)
		if i >= len(body) {
			return dst[:start], errNotObject
		}
		if body[i] == '}' {
			return append(dst, '}'), nil
		}
		if body[i] != ',' {
			return dst[:start], errNotObject
		}
		i = skipWS(body, i+1)
	}
}

// omitMember reports whether a stored member is left out of a result. The
// registry's own members (score, source, visibility) are never taken from a
// stored body, whether or not this result carries them, and a name written
// with JSON escapes ("scor\u0065") is compared as it decodes, since that is
// how a client's parser reads it.
func omitMember(key []byte, p projection) bool {
	if bytes.IndexByte(key, '\\') >= 0 {
		var name string
		if err := json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &name); err != nil {
			return true // a name that does not decode is no member of ours to copy
		}
		key = []byte(name)
	}
	// Switching on the conversion itself allocates nothing: a name held in
	// a variable that escapes (as into Unmarshal) was a copy per member.
	switch string(key) {
	case "representativeQueries":
		return !p.keepRQ
	case "score", "source", "visibility":
		return true
	}
	return false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// skipValue returns the index just past the JSON value starting at b[i].
// Bodies reach here already validated, so it only tracks nesting and
// strings, not the finer grammar.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, ok := skipString(b, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
			j++
		}
		if j == i {
			return 0, false
		}
		return j, true
	}
}
