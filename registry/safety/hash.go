package safety

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"

	"github.com/gowebpki/jcs"
)

// DescriptionHash returns "sha256:<hex>" over a canonical form of what a
// model is shown of t: name, title, description, input schema and
// annotations. JSON values are canonicalised with RFC 8785 (JCS), so key
// order and insignificant whitespace in the schema do not change the hash,
// while any change to any text, hidden characters included, does. The
// server and its instructions are not part of it: one server's instructions
// changing is one change, not one per tool.
//
// A caller pins the hash when it first sees a tool and reports a tool whose
// hash later differs (a "rug pull": a description changed after users
// approved it).
func DescriptionHash(t Tool) string {
	doc := struct {
		Name           string          `json:"name"`
		Title          string          `json:"title"`
		Description    string          `json:"description"`
		InputSchema    json.RawMessage `json:"inputSchema"`
		InputSchemaRaw *string         `json:"inputSchemaRaw,omitempty"`
		Annotations    json.RawMessage `json:"annotations"`
		AnnotationsRaw *string         `json:"annotationsRaw,omitempty"`
	}{Name: t.Name, Title: t.Title, Description: t.Description}
	doc.InputSchema, doc.InputSchemaRaw = canonicalJSON(t.InputSchema)
	doc.Annotations, doc.AnnotationsRaw = canonicalJSON(t.Annotations)
	b, err := json.Marshal(doc)
	if err == nil {
		b, err = jcs.Transform(b)
	}
	if err != nil {
		// Unreachable: every member is valid JSON by construction. Hash the
		// plain concatenation rather than fail, so the caller still pins something.
		b = []byte(t.Name + "\x00" + t.Title + "\x00" + t.Description + "\x00" + string(t.InputSchema) + "\x00" + string(t.Annotations))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonicalJSON returns raw in JCS form; absent and null both become null.
// Text that is not JSON is returned as a string, so the hash still covers it
// (and differs from any valid schema).
func canonicalJSON(raw json.RawMessage) (json.RawMessage, *string) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return json.RawMessage("null"), nil
	}
	c, err := jcs.Transform(trimmed)
	if err != nil {
		s := string(raw)
		return json.RawMessage("null"), &s
	}
	return c, nil
}

// Change kinds reported by Compare.
const (
	ChangeAdded   = "added"
	ChangeRemoved = "removed"
	ChangeChanged = "changed"
)

// Change is one difference between two sets of pinned description hashes.
type Change struct {
	Tool    string `json:"tool"`
	Kind    string `json:"kind"` // ChangeAdded, ChangeRemoved or ChangeChanged
	OldHash string `json:"oldHash,omitempty"`
	NewHash string `json:"newHash,omitempty"`
}

// Compare diffs two maps of tool key (typically the tool name, or
// server+name) to DescriptionHash and returns the tools added, removed and
// changed, sorted by tool key. A changed hash is the rug-pull signal; added
// and removed tools are reported too because a tool count change is news to
// the change feed.
func Compare(old, new map[string]string) []Change {
	var out []Change
	for k, oh := range old {
		nh, ok := new[k]
		switch {
		case !ok:
			out = append(out, Change{Tool: k, Kind: ChangeRemoved, OldHash: oh})
		case nh != oh:
			out = append(out, Change{Tool: k, Kind: ChangeChanged, OldHash: oh, NewHash: nh})
		}
	}
	for k, nh := range new {
		if _, ok := old[k]; !ok {
			out = append(out, Change{Tool: k, Kind: ChangeAdded, NewHash: nh})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool < out[j].Tool })
	return out
}
