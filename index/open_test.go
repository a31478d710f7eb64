package index

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustOpenDir(t *testing.T, dir string) (*Index, bool) {
	t.Helper()
	ix, rebuild, err := OpenWith(dir, Options{LockTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return ix, rebuild
}

func TestOpenLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "index")
	doc := Doc{ID: "urn:ai:a.example:x", Name: "x", Description: "converts currencies", Type: "mcp"}

	ix, rebuild := mustOpenDir(t, dir)
	if !rebuild {
		t.Fatal("new index: rebuild = false")
	}
	if err := ix.Put([]Doc{doc}); err != nil {
		t.Fatal(err)
	}
	// A second open of a held index times out instead of blocking forever.
	if _, _, err := OpenWith(dir, Options{LockTimeout: 100 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: err = %v, want ErrLocked", err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}

	ix, rebuild = mustOpenDir(t, dir)
	if rebuild {
		t.Fatal("reopen of a current index: rebuild = true")
	}
	if n, _ := ix.Count(); n != 1 {
		t.Fatalf("reopened index holds %d docs, want 1", n)
	}
	if len(ix.probes.items) != 1 {
		t.Fatalf("probe sample not persisted: %v", ix.probes.items)
	}
	// Simulate an index written by an older build.
	if err := ix.bleve.SetInternal(internalVersion, []byte("ardx-index-0-old")); err != nil {
		t.Fatal(err)
	}
	_ = ix.Close()

	ix, rebuild = mustOpenDir(t, dir)
	if !rebuild {
		t.Fatal("older mapping version: rebuild = false")
	}
	if n, _ := ix.Count(); n != 0 {
		t.Fatalf("rebuilt index holds %d docs, want 0 (old one discarded)", n)
	}
	_ = ix.Close()

	// Corrupt metadata: discarded and recreated.
	if err := os.WriteFile(filepath.Join(dir, metaFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	ix, rebuild = mustOpenDir(t, dir)
	if !rebuild {
		t.Fatal("corrupt index: rebuild = false")
	}
	_ = ix.Close()
}

func TestOpenRefusesForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "precious.txt")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(dir); err == nil {
		t.Fatal("Open of a non-index directory succeeded")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("foreign file deleted: %v", err)
	}
	// An empty directory is fine.
	ix, rebuild := mustOpenDir(t, t.TempDir())
	defer ix.Close()
	if !rebuild {
		t.Fatal("empty dir: rebuild = false")
	}
}

func TestSplitWordParts(t *testing.T) {
	tests := []struct {
		in   string
		want []string // nil: a single word
	}{
		{"weather", nil},
		{"getTinyImage", []string{"get", "Tiny", "Image"}},
		{"HTTPServer", []string{"HTTP", "Server"}},
		{"send_email", []string{"send", "email"}},
		{"api.example.com", []string{"api", "example", "com"}},
		{"urn:ai:x", []string{"urn", "ai", "x"}},
		{"GitHub", []string{"Git", "Hub"}},
		{"ABC", nil},
		{"v2Api", []string{"v2", "Api"}},
		{"__init__", nil},
		{"_a_b_", []string{"a", "b"}},
		{"ÉtéChaud", []string{"Été", "Chaud"}},
	}
	for _, tc := range tests {
		parts := splitWordParts([]byte(tc.in))
		var got []string
		for _, p := range parts {
			got = append(got, tc.in[p[0]:p[1]])
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("splitWordParts(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAnalyzerKeepsOriginalAndParts(t *testing.T) {
	ix, err := OpenMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	got := ix.analyseQuery("GitHub getTinyImage the send_email")
	for _, want := range []string{"github", "git", "hub", "gettinyimag", "get", "tini", "imag", "send_email", "send", "email"} {
		if !slices.Contains(got, want) {
			t.Errorf("analysed terms %q lack %q", got, want)
		}
	}
	if slices.Contains(got, "the") {
		t.Errorf("stop word kept: %q", got)
	}
}

func TestProbeSampleIsOrderIndependent(t *testing.T) {
	var ids []string
	for i := range 500 {
		ids = append(ids, "urn:ai:x:"+strings.Repeat("a", i%7)+string(rune('a'+i%26))+string(rune('0'+i%10))+strings.Repeat("z", i/26))
	}
	a, b := &probeSample{}, &probeSample{}
	for _, id := range ids {
		a.offer(id, "text "+id)
	}
	for i := len(ids) - 1; i >= 0; i-- {
		b.offer(ids[i], "text "+ids[i])
	}
	if len(a.items) != probeSize || !slices.Equal(a.items, b.items) {
		t.Fatalf("samples differ by insertion order (%d vs %d items)", len(a.items), len(b.items))
	}
	c := decodeProbeSample(a.encode())
	if !slices.Equal(c.items, a.items) {
		t.Fatal("sample does not survive encode/decode")
	}
	if !a.remove(a.items[0].ID) || len(a.items) != probeSize-1 {
		t.Fatal("remove of a sampled ID did not shrink the sample")
	}
}

func FuzzSplitWordParts(f *testing.F) {
	for _, s := range []string{"getTinyImage", "a_b.c:d", "HTTPServer", "ÉtéChaud", "\xff\xfeA", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parts := splitWordParts([]byte(s))
		last := 0
		for _, p := range parts {
			if p[0] < last || p[1] <= p[0] || p[1] > len(s) {
				t.Fatalf("bad parts %v for %q", parts, s)
			}
			last = p[1]
		}
	})
}

func FuzzDecodeProbeSample(f *testing.F) {
	f.Add([]byte(`[{"h":1,"id":"a","t":"x"}]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := decodeProbeSample(b)
		if len(p.items) > probeSize {
			t.Fatalf("sample of %d items", len(p.items))
		}
		p.offer("urn:x", "y")
	})
}
