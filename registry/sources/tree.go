package sources

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// maxTreeNodes bounds the generic tree a document decodes into. YAML aliases
// can make a small document expand into a huge tree; yaml.v3 refuses the
// worst cases, this catches the rest.
const maxTreeNodes = 1_000_000

var errTooManyNodes = errors.New("document expands to too many nodes")

// decodeTree reads a JSON or YAML document into map[string]any / []any /
// scalars (strings, bool, json.Number, nil), the shape encoding/json gives,
// whatever the input syntax.
func decodeTree(body []byte) (any, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, errors.New("empty document")
	}
	if trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err == nil {
			if _, err := dec.Token(); err != io.EOF {
				return nil, errors.New("data after the JSON value")
			}
			n := 0
			return v, countNodes(v, &n)
		}
		// JSON is a subset of YAML 1.2, but a failed JSON parse is more
		// likely a broken JSON document; still, fall through to YAML so
		// flow-style YAML is read.
	}
	var v any
	if err := yaml.Unmarshal(trimmed, &v); err != nil {
		return nil, fmt.Errorf("neither JSON nor YAML: %w", err)
	}
	n := 0
	return fromYAML(v, &n)
}

func countNodes(v any, n *int) error {
	*n++
	if *n > maxTreeNodes {
		return errTooManyNodes
	}
	switch v := v.(type) {
	case map[string]any:
		for _, c := range v {
			if err := countNodes(c, n); err != nil {
				return err
			}
		}
	case []any:
		for _, c := range v {
			if err := countNodes(c, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// fromYAML converts yaml.v3's values to encoding/json's: non-string keys
// (response codes such as 200) become strings, numbers json.Number,
// timestamps RFC 3339 strings.
func fromYAML(v any, n *int) (any, error) {
	*n++
	if *n > maxTreeNodes {
		return nil, errTooManyNodes
	}
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, c := range v {
			cv, err := fromYAML(c, n)
			if err != nil {
				return nil, err
			}
			out[k] = cv
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, c := range v {
			cv, err := fromYAML(c, n)
			if err != nil {
				return nil, err
			}
			ks, err := fromYAML(k, n)
			if err != nil {
				return nil, err
			}
			out[scalarText(ks)] = cv
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, c := range v {
			cv, err := fromYAML(c, n)
			if err != nil {
				return nil, err
			}
			out[i] = cv
		}
		return out, nil
	case int:
		return json.Number(strconv.Itoa(v)), nil
	case int64:
		return json.Number(strconv.FormatInt(v, 10)), nil
	case uint64:
		return json.Number(strconv.FormatUint(v, 10)), nil
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return strconv.FormatFloat(v, 'g', -1, 64), nil // not representable in JSON
		}
		return json.Number(strconv.FormatFloat(v, 'g', -1, 64)), nil
	case time.Time:
		return v.UTC().Format(time.RFC3339), nil
	case string, bool, nil:
		return v, nil
	default:
		return fmt.Sprint(v), nil
	}
}

// scalarText renders a scalar as the text a YAML author wrote.
func scalarText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return "null"
	default:
		return fmt.Sprint(v)
	}
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func arr(v any) []any {
	a, _ := v.([]any)
	return a
}

// str reads a string member; numbers and booleans written without quotes in
// YAML (version: 1.0) are read as their text.
func str(m map[string]any, key string) string {
	switch v := m[key].(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

func boolean(m map[string]any, key string) bool {
	b, _ := m[key].(bool)
	return b
}

// stringList reads the strings of an array, skipping other values.
func stringList(v any) []string {
	var out []string
	for _, e := range arr(v) {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// pointer resolves a local JSON pointer ("#/components/schemas/Pet")
// against root. Only same-document references are followed: ardx never
// fetches a second URL on a publisher's say-so while parsing.
func pointer(root any, ref string) (any, bool) {
	if !strings.HasPrefix(ref, "#") {
		return nil, false
	}
	p := strings.TrimPrefix(ref, "#")
	if p == "" {
		return root, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	cur := root
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if unesc, err := url.PathUnescape(tok); err == nil {
			tok = unesc
		}
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// deref follows $ref chains of a non-schema object (parameter, request
// body, security scheme) to the object itself.
func deref(root any, v any) map[string]any {
	m := obj(v)
	for i := 0; i < 8 && m != nil; i++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		t, ok := pointer(root, ref)
		if !ok {
			return nil
		}
		m = obj(t)
	}
	if m != nil {
		if _, ok := m["$ref"]; ok {
			return nil // a chain longer than 8 is a loop in practice
		}
	}
	return m
}

// Bounds on a resolved schema: how deep $refs are followed and how many
// nodes the copy may have.
const (
	maxSchemaDepth = 12
	maxSchemaNodes = 2000
)

// resolveSchema returns a copy of schema with local $refs inlined. A $ref
// already being expanded on the current path (a recursive schema), one past
// maxSchemaDepth, or one that points nowhere is kept as {"$ref": ...}; past
// maxSchemaNodes the rest is cut and marked "x-ardx-truncated".
func resolveSchema(root, schema any) any {
	r := &schemaResolver{root: root, active: map[string]bool{}}
	return r.walk(schema, 0)
}

type schemaResolver struct {
	root   any
	active map[string]bool
	nodes  int
}

func (r *schemaResolver) walk(v any, depth int) any {
	r.nodes++
	if r.nodes > maxSchemaNodes {
		return map[string]any{"x-ardx-truncated": true}
	}
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			if r.active[ref] || depth >= maxSchemaDepth {
				return map[string]any{"$ref": ref}
			}
			target, ok := pointer(r.root, ref)
			if !ok {
				return map[string]any{"$ref": ref}
			}
			r.active[ref] = true
			out := r.walk(target, depth+1)
			delete(r.active, ref)
			// OpenAPI 3.1 allows siblings of $ref (description, say): they
			// win over the target's.
			if m, ok := out.(map[string]any); ok && len(v) > 1 {
				merged := make(map[string]any, len(m)+len(v))
				for k, c := range m {
					merged[k] = c
				}
				for _, k := range sortedKeys(v) {
					if k != "$ref" {
						merged[k] = r.walk(v[k], depth+1)
					}
				}
				return merged
			}
			return out
		}
		out := make(map[string]any, len(v))
		// Sorted, so that a truncated copy is the same on every run.
		for _, k := range sortedKeys(v) {
			out[k] = r.walk(v[k], depth)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, c := range v {
			out[i] = r.walk(c, depth)
		}
		return out
	default:
		return v
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
