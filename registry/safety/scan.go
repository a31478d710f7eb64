package safety

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tool is what a model is shown of one MCP tool, plus the instructions of
// the server that offers it.
type Tool struct {
	// Server names the server the tool belongs to (an endpoint URL or an
	// identifier); Scan does not read it, Summarize groups by it.
	Server      string          `json:"server,omitempty"`
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	// Instructions are the server's instructions (InitializeResult or
	// server/discover). They reach the model whichever tool it uses, so
	// Scan reports them on every tool of the server; Summarize counts them
	// once per server.
	Instructions string `json:"instructions,omitempty"`
}

// Finding is one match of one rule in one text field of a tool.
type Finding struct {
	// Rule is the stable rule id (a Rule* constant).
	Rule string `json:"rule"`
	// Field says where the text is, as a JSON-pointer-like path from the
	// tool: "name", "title", "description", "annotations/title",
	// "inputSchema/properties/path/description", "inputSchema/properties/mode/enum/2",
	// "instructions". A property name is reported at the property's own path.
	Field string `json:"field"`
	// Excerpt is the matching text with some context, every invisible
	// character made visible (see Visible).
	Excerpt string `json:"excerpt"`
	// Start and End are byte offsets of the match in the field's original
	// UTF-8 text, End exclusive.
	Start int `json:"start"`
	End   int `json:"end"`
}

// surfaceKind says which rules apply to a text surface.
type surfaceKind int

const (
	kindText       surfaceKind = iota // names, titles, values: every text rule
	kindProse                         // descriptions: every text rule and a length limit
	kindInstruct                      // server instructions: as prose, with its own limit
	kindPropName                      // property names: hidden text only
	kindSchemaDesc                    // descriptions inside the input schema
)

type surface struct {
	field string
	text  string
	kind  surfaceKind
}

// Scan runs every rule over every text surface of t and returns the
// findings ordered by field, then position. It never fails: malformed or
// oversized schemas are reported or skipped, and the work is bounded by
// MaxFieldBytes, MaxSchemaBytes and a cap on surfaces per tool.
func Scan(t Tool) []Finding {
	var out []Finding
	surfaces, schemaTooBig := collectSurfaces(t)
	order := make(map[string]int, len(surfaces)+1)
	for i, s := range surfaces {
		if _, ok := order[s.field]; !ok {
			order[s.field] = i
		}
		out = append(out, scanSurface(s)...)
	}
	if schemaTooBig {
		order["inputSchema"] = -1
		out = append(out, Finding{
			Rule:    RuleOversizedDescription,
			Field:   "inputSchema",
			Excerpt: fmt.Sprintf("<input schema of %d bytes, over the %d-byte limit; not scanned>", len(t.InputSchema), MaxSchemaBytes),
			Start:   0,
			End:     len(t.InputSchema),
		})
	}
	sortFindings(out, order)
	return out
}

// collectSurfaces lists the text surfaces of t in a fixed order.
func collectSurfaces(t Tool) (surfaces []surface, schemaTooBig bool) {
	add := func(field, text string, kind surfaceKind) {
		if text == "" || len(surfaces) >= maxSurfaces {
			return
		}
		surfaces = append(surfaces, surface{field: field, text: text, kind: kind})
	}
	add("name", t.Name, kindText)
	add("title", t.Title, kindText)
	add("description", t.Description, kindProse)
	if len(t.Annotations) > 0 && len(t.Annotations) <= MaxSchemaBytes {
		var ann struct {
			Title string `json:"title"`
		}
		if json.Unmarshal(t.Annotations, &ann) == nil {
			add("annotations/title", ann.Title, kindText)
		}
	}
	if len(t.InputSchema) > MaxSchemaBytes {
		schemaTooBig = true
	} else if len(t.InputSchema) > 0 {
		dec := json.NewDecoder(bytes.NewReader(t.InputSchema))
		dec.UseNumber()
		var schema any
		if dec.Decode(&schema) == nil {
			walkSchema(schema, "inputSchema", 0, add)
		}
	}
	add("instructions", t.Instructions, kindInstruct)
	return surfaces, schemaTooBig
}

// Keywords of JSON Schema whose value is a schema, a map of schemas or a
// list of schemas. Walking them (rather than only "properties") is what
// catches poisoning buried in nested objects, array items and unions.
var (
	schemaKeys    = []string{"items", "additionalProperties", "additionalItems", "contains", "not", "if", "then", "else", "propertyNames", "unevaluatedProperties", "unevaluatedItems"}
	schemaMapKeys = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	schemaList    = []string{"items", "prefixItems", "anyOf", "oneOf", "allOf"}
	proseKeys     = []string{"description", "title", "$comment"}
	valueKeys     = []string{"default", "const", "enum", "examples"}
)

// walkSchema hands every text surface of a JSON Schema to add, in a
// deterministic order (map keys sorted).
func walkSchema(v any, ptr string, depth int, add func(string, string, surfaceKind)) {
	m, ok := v.(map[string]any)
	if !ok || depth > maxSchemaDepth {
		return
	}
	for _, k := range proseKeys {
		if s, ok := m[k].(string); ok {
			kind := kindText
			if k == "description" {
				kind = kindSchemaDesc
			}
			add(ptr+"/"+escapePointer(k), s, kind)
		}
	}
	for _, k := range valueKeys {
		if val, ok := m[k]; ok {
			walkValue(val, ptr+"/"+escapePointer(k), depth+1, add)
		}
	}
	for _, k := range schemaMapKeys {
		sub, ok := m[k].(map[string]any)
		if !ok {
			continue
		}
		for _, name := range sortedKeys(sub) {
			p := ptr + "/" + escapePointer(k) + "/" + escapePointer(name)
			add(p, name, kindPropName)
			walkSchema(sub[name], p, depth+1, add)
		}
	}
	for _, k := range schemaKeys {
		walkSchema(m[k], ptr+"/"+escapePointer(k), depth+1, add)
	}
	for _, k := range schemaList {
		list, ok := m[k].([]any)
		if !ok {
			continue
		}
		for i, sub := range list {
			walkSchema(sub, ptr+"/"+escapePointer(k)+"/"+strconv.Itoa(i), depth+1, add)
		}
	}
}

// walkValue hands every string inside a default, const, enum or examples
// value to add: poisoned defaults and enum values reach the model as text.
func walkValue(v any, ptr string, depth int, add func(string, string, surfaceKind)) {
	if depth > maxSchemaDepth {
		return
	}
	switch v := v.(type) {
	case string:
		add(ptr, v, kindText)
	case []any:
		for i, e := range v {
			walkValue(e, ptr+"/"+strconv.Itoa(i), depth+1, add)
		}
	case map[string]any:
		for _, k := range sortedKeys(v) {
			walkValue(v[k], ptr+"/"+escapePointer(k), depth+1, add)
		}
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

// escapePointer escapes a JSON Pointer reference token (RFC 6901).
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// scanSurface runs the rules that apply to one surface.
func scanSurface(s surface) []Finding {
	var out []Finding
	if f, ok := oversized(s); ok {
		out = append(out, f)
	}
	text := capText(s.text, MaxFieldBytes)
	out = append(out, hiddenText(s.field, text)...)
	if s.kind == kindPropName {
		return out
	}
	n := normalize(text)
	for _, r := range matchers {
		var spans [][2]int
		for i, pat := range r.patterns {
			if !r.mayMatch(i, n.text) {
				continue
			}
			hit := pat.re.SubexpIndex("hit")
			for _, m := range pat.re.FindAllStringSubmatchIndex(n.text, maxFindingsPerKey) {
				if pat.reject != nil && pat.reject(n.text, m) {
					continue
				}
				ns, ne := m[0], m[1]
				if hit > 0 && m[2*hit] >= 0 {
					ns, ne = m[2*hit], m[2*hit+1]
				}
				if ns == ne {
					continue
				}
				os, oe := n.span(ns, ne)
				spans = append(spans, [2]int{os, oe})
			}
		}
		for _, sp := range mergeSpans(spans, maxFindingsPerKey) {
			out = append(out, Finding{Rule: r.id, Field: s.field, Excerpt: excerpt(text, sp[0], sp[1]), Start: sp[0], End: sp[1]})
		}
	}
	return out
}

// mergeSpans sorts spans and merges overlapping ones, so that two patterns
// of one rule matching the same words give one finding.
func mergeSpans(spans [][2]int, limit int) [][2]int {
	if len(spans) == 0 {
		return nil
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i][0] != spans[j][0] {
			return spans[i][0] < spans[j][0]
		}
		return spans[i][1] < spans[j][1]
	})
	out := spans[:1]
	for _, sp := range spans[1:] {
		last := &out[len(out)-1]
		if sp[0] < last[1] {
			last[1] = max(last[1], sp[1])
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, sp)
	}
	return out
}

// oversized reports a description longer than its kind's threshold.
func oversized(s surface) (Finding, bool) {
	var limit int
	switch s.kind {
	case kindProse:
		limit = MaxDescriptionRunes
	case kindSchemaDesc:
		limit = MaxPropertyDescriptionRunes
	case kindInstruct:
		limit = MaxInstructionsRunes
	default:
		return Finding{}, false
	}
	if len(s.text) <= limit { // bytes >= runes: cheap early exit
		return Finding{}, false
	}
	n := utf8.RuneCountInString(s.text)
	if n <= limit {
		return Finding{}, false
	}
	// Point at the text beyond the threshold: that is what a reviewer skims past.
	at := 0
	for range limit {
		_, size := utf8.DecodeRuneInString(s.text[at:])
		at += size
	}
	return Finding{
		Rule:    RuleOversizedDescription,
		Field:   s.field,
		Excerpt: fmt.Sprintf("<%d characters, over the %d-character threshold> %s", n, limit, excerpt(s.text, at, min(len(s.text), at+excerptMatchMax/2))),
		Start:   at,
		End:     len(s.text),
	}, true
}

// htmlComment matches an HTML comment, or an unterminated one to the end of
// the text (models read it either way; renderers hide it).
var htmlComment = regexp.MustCompile(`(?s)<!--.*?(?:-->|\z)`)

// ansiEscape matches an ESC-introduced sequence (CSI, OSC, or a single
// character) or a C1 CSI: terminals act on them and hide them.
var ansiEscape = regexp.MustCompile("(?:\x1b\\[|\u009b)[0-9;?<=>!]*[ -/]*[@-~]?|\x1b\\][^\x07\x1b]*(?:\x07|\x1b\\\\)?|\x1b[@-Z\\\\-_]?")

// hiddenText reports runs of invisible characters, ANSI escape sequences
// and HTML comments in text.
func hiddenText(field, text string) []Finding {
	var spans [][2]int
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if !isInvisible(r) || isEmojiJoiner(text, i, r) {
			i += size
			continue
		}
		j := i + size
		for j < len(text) {
			t, n := utf8.DecodeRuneInString(text[j:])
			if !isInvisible(t) {
				break
			}
			j += n
		}
		spans = append(spans, [2]int{i, j})
		i = j
	}
	// The substring checks skip the regular expressions on almost every field.
	if strings.Contains(text, "\x1b") || strings.Contains(text, "\u009b") {
		for _, m := range ansiEscape.FindAllStringIndex(text, maxFindingsPerKey) {
			spans = append(spans, [2]int{m[0], m[1]})
		}
	}
	if strings.Contains(text, "<!--") {
		for _, m := range htmlComment.FindAllStringIndex(text, maxFindingsPerKey) {
			spans = append(spans, [2]int{m[0], m[1]})
		}
	}
	var out []Finding
	for _, sp := range mergeSpans(spans, maxFindingsPerKey) {
		out = append(out, Finding{Rule: RuleHiddenText, Field: field, Excerpt: excerpt(text, sp[0], sp[1]), Start: sp[0], End: sp[1]})
	}
	return out
}

// isEmojiJoiner reports whether the rune at i is a zero-width joiner (or
// variation selector run) inside an emoji sequence such as 👩‍💻, where it is
// how the emoji is spelled, not hidden text.
func isEmojiJoiner(text string, i int, r rune) bool {
	if r != 0x200D {
		return false
	}
	prev, _ := utf8.DecodeLastRuneInString(text[:i])
	if prev == 0xFE0F {
		prev, _ = utf8.DecodeLastRuneInString(text[:i-3])
	}
	next, _ := utf8.DecodeRuneInString(text[i+3:])
	return isPictograph(prev) && isPictograph(next)
}

func isPictograph(r rune) bool {
	return unicode.Is(unicode.So, r) || (r >= 0x1F000 && r <= 0x1FAFF) || (r >= 0x2600 && r <= 0x27BF)
}
