package registry

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestAppendProjected(t *testing.T) {
	src := []byte(`"https://r.test"`)
	tests := []struct {
		name string
		body string
		p    projection
		want string
	}{
		{"drops representativeQueries and splices ours first",
			`{"identifier":"urn:air:a.test:x","representativeQueries":["a","b"],"displayName":"X"}`,
			projection{score: 87, withScore: true, source: src, visibility: "public"},
			`{"score":87,"source":"https://r.test","visibility":"public","identifier":"urn:air:a.test:x","displayName":"X"}`},
		{"stored members that collide with ours are replaced",
			`{"score":3,"source":"elsewhere","visibility":"x","identifier":"urn:air:a.test:x"}`,
			projection{score: 5, withScore: true, source: src, visibility: "private"},
			`{"score":5,"source":"https://r.test","visibility":"private","identifier":"urn:air:a.test:x"}`},
		{"whitespace, nesting and escapes survive",
			"{ \"identifier\" : \"urn:air:a.test:x\" ,\n \"data\": {\"k\": [1, {\"s\": \"a\\\"}]\"}], \"t\": true},\"n\":null }",
			projection{score: 0, withScore: true, source: src},
			`{"score":0,"source":"https://r.test","identifier":"urn:air:a.test:x","data":{"k": [1, {"s": "a\"}]"}], "t": true},"n":null}`},
		{"empty object", `{}`, projection{visibility: "public"}, `{"visibility":"public"}`},
		{"listing keeps representativeQueries",
			`{"identifier":"urn:air:a.test:x","representativeQueries":["a"]}`,
			projection{visibility: "public", keepRQ: true},
			`{"visibility":"public","identifier":"urn:air:a.test:x","representativeQueries":["a"]}`},
		{"nothing spliced, only the rest", `{"representativeQueries":[],"a":1}`, projection{}, `{"a":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := appendProjected([]byte("prefix:"), []byte(tc.body), tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "prefix:"+tc.want {
				t.Fatalf("got  %s\nwant prefix:%s", got, tc.want)
			}
			if !json.Valid(got[len("prefix:"):]) {
				t.Fatalf("output is not JSON: %s", got)
			}
		})
	}
}

func TestAppendProjectedRejectsNonObjects(t *testing.T) {
	for _, body := range []string{``, `[]`, `"s"`, `{"a":1`, `{"a"}`, `{"a":1 "b":2}`, `{"a":"x}`, `{1:2}`} {
		out, err := appendProjected([]byte("keep"), []byte(body), projection{withScore: true})
		if err == nil {
			t.Errorf("%q: accepted", body)
		}
		if string(out) != "keep" {
			t.Errorf("%q: left %q behind", body, out)
		}
	}
}

// FuzzAppendProjected checks that any JSON object comes out as a JSON object
// carrying our members and never representativeQueries.
func FuzzAppendProjected(f *testing.F) {
	f.Add([]byte(`{"identifier":"urn:air:a.test:x","representativeQueries":["a"],"data":{"x":[1,2,{"y":"}"}]}}`))
	f.Add([]byte(`{ "a" : "\\\"" , "b":[ ] }`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var probe map[string]json.RawMessage
		if json.Unmarshal(body, &probe) != nil || probe == nil {
			return
		}
		out, err := appendProjected(nil, body, projection{score: 42, withScore: true, source: []byte(`"s"`), visibility: "public"})
		if err != nil {
			t.Fatalf("valid object %q rejected: %v", body, err)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output %q of %q is not an object: %v", out, body, err)
		}
		if _, ok := got["representativeQueries"]; ok {
			t.Fatalf("representativeQueries kept: %s", out)
		}
		if !bytes.Equal(got["score"], []byte("42")) || !bytes.Equal(got["source"], []byte(`"s"`)) {
			t.Fatalf("members not spliced: %s", out)
		}
	})
}
