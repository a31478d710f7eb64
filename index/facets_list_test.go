package index_test

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/index"
)

func TestFacets(t *testing.T) {
	ix := mustOpenMemory(t)
	mustPut(t, ix, fixture())
	tests := []struct {
		name      string
		text      string
		filter    index.Filter
		req       index.FacetRequest
		want      []index.Bucket
		wantOther int
		wantErr   error
	}{
		{name: "type over all", req: index.FacetRequest{Field: "type"},
			want: []index.Bucket{{"api-operation", 2}, {"mcp", 2}, {"a2a", 1}}},
		{name: "tags multi-valued, normalised", req: index.FacetRequest{Field: "tags"},
			want: []index.Bucket{{"billing", 2}, {"weather", 2}, {"alerts", 1}, {"forecast", 1}, {"maps", 1}, {"reporting", 1}}},
		{name: "limit counts the rest as other", req: index.FacetRequest{Field: "tags", Limit: 2},
			want: []index.Bucket{{"billing", 2}, {"weather", 2}}, wantOther: 4},
		{name: "minCount folds small buckets into other", req: index.FacetRequest{Field: "type", MinCount: 2},
			want: []index.Bucket{{"api-operation", 2}, {"mcp", 2}}, wantOther: 1},
		{name: "with text", text: "invoices", req: index.FacetRequest{Field: "version"},
			want: []index.Bucket{{"1.2.0", 1}, {"1.3.0", 1}}},
		{name: "with filter", filter: index.Filter{"publisher": {"weather.example"}}, req: index.FacetRequest{Field: "capabilities"},
			want: []index.Bucket{{"tools", 2}, {"resources", 1}}},
		{name: "metadata field", req: index.FacetRequest{Field: "metadata.region"},
			want: []index.Bucket{{"eu", 1}, {"us", 1}}},
		{name: "trust fields", req: index.FacetRequest{Field: "trustManifest.attestations.type"},
			want: []index.Bucket{{"SOC2", 2}, {"ISO27001", 1}}},
		{name: "no match gives empty buckets", text: "zzzqqq", req: index.FacetRequest{Field: "type"}, want: []index.Bucket{}},
		{name: "unknown field", req: index.FacetRequest{Field: "colour"}, wantErr: index.ErrUnknownFilterKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := ix.Facets(t.Context(), tc.text, tc.filter, nil, []index.FacetRequest{tc.req})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := fs[tc.req.Field]
			// Equal counts come back in any order; compare as sets
			// after checking counts are non-increasing.
			for i := 1; i < len(got.Buckets); i++ {
				if got.Buckets[i].Count > got.Buckets[i-1].Count {
					t.Errorf("buckets not by count: %v", got.Buckets)
				}
			}
			key := func(b index.Bucket) string { return fmt.Sprintf("%s=%d", b.Value, b.Count) }
			var g, w []string
			for _, b := range got.Buckets {
				g = append(g, key(b))
			}
			for _, b := range tc.want {
				w = append(w, key(b))
			}
			slices.Sort(g)
			slices.Sort(w)
			if !slices.Equal(g, w) || got.Other != tc.wantOther {
				t.Errorf("buckets %v other %d; want %v other %d", got.Buckets, got.Other, tc.want, tc.wantOther)
			}
		})
	}
	// Seven entry fields and three payment fields (pay:protocol,
	// pay:network, pay:verified; pay:price is a range, not a facet).
	if n := len(index.FacetFields()); n != 10 {
		t.Errorf("FacetFields has %d fields, want 10", n)
	}
	for _, f := range index.FacetFields() {
		if !index.FilterKey(f) {
			t.Errorf("facet field %q is not a filter key", f)
		}
	}
}

// listFixture has names and timestamps that collide on purpose, so the
// identifier tie-break decides.
func listFixture() []index.Doc {
	var docs []index.Doc
	names := []string{"Alpha", "beta", "Gamma", "alpha", "Delta", "epsilon", "Beta"}
	for i := range 23 {
		docs = append(docs, index.Doc{
			ID:          fmt.Sprintf("urn:ai:p%d.example:item-%02d", i%3, i),
			Name:        fmt.Sprintf("item-%02d", i),
			DisplayName: names[i%len(names)] + " tool",
			Publisher:   fmt.Sprintf("p%d.example", i%3),
			Type:        []string{"mcp", "a2a"}[i%2],
			CreatedAt:   t0.Add(time.Duration(i/2) * time.Hour), // pairs share a timestamp
			UpdatedAt:   t0.Add(time.Duration(23-i) * time.Minute),
		})
	}
	return docs
}

func listAll(t *testing.T, ix *index.Index, req index.ListRequest) ([]string, uint64) {
	t.Helper()
	var all []string
	var total uint64
	for page := 0; ; page++ {
		if page > 100 {
			t.Fatal("paging does not end")
		}
		res, err := ix.List(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if page > 0 && res.Total != total {
			t.Fatalf("Total changed between pages: %d then %d", total, res.Total)
		}
		total = res.Total
		all = append(all, res.IDs...)
		if res.Next == nil {
			if len(res.IDs) > req.Size {
				t.Fatalf("page of %d > size %d", len(res.IDs), req.Size)
			}
			return all, total
		}
		if len(res.IDs) != req.Size {
			t.Fatalf("non-final page has %d items, want %d", len(res.IDs), req.Size)
		}
		req.After = res.Next
	}
}

func TestList(t *testing.T) {
	ix := mustOpenMemory(t)
	docs := listFixture()
	mustPut(t, ix, docs)
	byID := map[string]index.Doc{}
	for _, d := range docs {
		byID[d.ID] = d
	}
	lower := strings.ToLower
	cmpFields := map[string]func(a, b index.Doc) int{
		"displayName": func(a, b index.Doc) int { return cmp.Compare(lower(a.DisplayName), lower(b.DisplayName)) },
		"createdAt":   func(a, b index.Doc) int { return a.CreatedAt.Compare(b.CreatedAt) },
		"updatedAt":   func(a, b index.Doc) int { return a.UpdatedAt.Compare(b.UpdatedAt) },
		"identifier":  func(a, b index.Doc) int { return cmp.Compare(a.ID, b.ID) },
	}
	// expected computes the order independently of the index.
	expected := func(filter func(index.Doc) bool, order []index.Order) []string {
		var sel []index.Doc
		for _, d := range docs {
			if filter == nil || filter(d) {
				sel = append(sel, d)
			}
		}
		slices.SortFunc(sel, func(a, b index.Doc) int {
			for _, o := range order {
				c := cmpFields[o.Field](a, b)
				if o.Desc {
					c = -c
				}
				if c != 0 {
					return c
				}
			}
			return cmp.Compare(a.ID, b.ID)
		})
		ids := make([]string, len(sel))
		for i, d := range sel {
			ids[i] = d.ID
		}
		return ids
	}
	orders := [][]index.Order{
		nil,
		{{Field: "identifier"}},
		{{Field: "identifier", Desc: true}},
		{{Field: "displayName"}},
		{{Field: "displayName", Desc: true}},
		{{Field: "createdAt"}},
		{{Field: "createdAt", Desc: true}},
		{{Field: "updatedAt"}},
		{{Field: "updatedAt", Desc: true}},
		{{Field: "displayName"}, {Field: "createdAt", Desc: true}},
	}
	for _, order := range orders {
		for _, size := range []int{1, 4, 23, 50} {
			t.Run(fmt.Sprintf("%v/size=%d", order, size), func(t *testing.T) {
				got, total := listAll(t, ix, index.ListRequest{OrderBy: order, Size: size})
				want := expected(nil, order)
				if total != uint64(len(docs)) {
					t.Errorf("Total %d, want %d", total, len(docs))
				}
				if !slices.Equal(got, want) {
					t.Errorf("order\n got %v\nwant %v", got, want)
				}
			})
		}
	}

	cut := t0.Add(5 * time.Hour)
	filters := []struct {
		name   string
		req    index.ListRequest
		filter func(index.Doc) bool
	}{
		{"display name substring, case-insensitive", index.ListRequest{DisplayName: []string{"ALPHA"}},
			func(d index.Doc) bool { return slices.Contains([]string{"Alpha tool", "alpha tool"}, d.DisplayName) }},
		{"display name OR", index.ListRequest{DisplayName: []string{"gamm", "elta"}},
			func(d index.Doc) bool { return slices.Contains([]string{"Gamma tool", "Delta tool"}, d.DisplayName) }},
		{"display name with regexp metacharacters is literal", index.ListRequest{DisplayName: []string{"a.*"}},
			func(index.Doc) bool { return false }},
		{"type", index.ListRequest{Types: []string{"A2A"}}, func(d index.Doc) bool { return d.Type == "a2a" }},
		{"publishers OR", index.ListRequest{Publishers: []string{"p0.example", "p2.example"}},
			func(d index.Doc) bool { return d.Publisher != "p1.example" }},
		{"createdAfter is strict", index.ListRequest{CreatedAfter: cut}, func(d index.Doc) bool { return d.CreatedAt.After(cut) }},
		{"updatedAfter", index.ListRequest{UpdatedAfter: t0.Add(10 * time.Minute)},
			func(d index.Doc) bool { return d.UpdatedAt.After(t0.Add(10 * time.Minute)) }},
		{"combined", index.ListRequest{Types: []string{"mcp"}, CreatedAfter: cut, Publishers: []string{"p1.example"}},
			func(d index.Doc) bool {
				return d.Type == "mcp" && d.CreatedAt.After(cut) && d.Publisher == "p1.example"
			}},
	}
	for _, tc := range filters {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Size = 3
			req.OrderBy = []index.Order{{Field: "updatedAt", Desc: true}}
			got, total := listAll(t, ix, req)
			want := expected(tc.filter, req.OrderBy)
			if !slices.Equal(got, want) || total != uint64(len(want)) {
				t.Errorf("got %v (total %d)\nwant %v", got, total, want)
			}
		})
	}
}

func TestListErrors(t *testing.T) {
	ix := mustOpenMemory(t)
	mustPut(t, ix, listFixture())
	if _, err := ix.List(t.Context(), index.ListRequest{OrderBy: []index.Order{{Field: "colour"}}}); !errors.Is(err, index.ErrUnknownFilterKey) {
		t.Errorf("unknown order field: err = %v", err)
	}
	if _, err := ix.List(t.Context(), index.ListRequest{After: []string{"a", "b", "c"}}); !errors.Is(err, index.ErrBadCursor) {
		t.Errorf("cursor of wrong length: err = %v", err)
	}
}

// TestListPagingUnderWrites checks that a doc added behind the cursor does
// not shift later pages (no duplicates, no gaps among pre-existing docs).
func TestListPagingUnderWrites(t *testing.T) {
	ix := mustOpenMemory(t)
	docs := listFixture()
	mustPut(t, ix, docs)
	req := index.ListRequest{Size: 5}
	first, err := ix.List(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, ix, []index.Doc{{ID: "urn:ai:a.example:aaa", Name: "aaa"}}) // sorts before the cursor
	req.After = first.Next
	rest, _ := listAll(t, ix, req)
	got := append(slices.Clone(first.IDs), rest...)
	var want []string
	for _, d := range docs {
		want = append(want, d.ID)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}
