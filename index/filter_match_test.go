package index_test

import (
	"context"
	"slices"
	"testing"

	"github.com/ardx-dev/ardx/index"
)

// TestFilterMatchesAgreesWithSearch: Filter.Matches, which checks results
// from elsewhere (upstream registries), selects exactly the docs a search
// with the same filter does.
func TestFilterMatchesAgreesWithSearch(t *testing.T) {
	ix := mustOpenMemory(t)
	docs := fixture()
	mustPut(t, ix, docs)
	filters := []index.Filter{
		{"type": {"mcp"}},
		{"type": {"MCP"}},
		{"type": {"a2a", "api-operation"}},
		{"tags": {" WEATHER "}},
		{"capabilities": {"Resources"}},
		{"publisher": {"Pay.Example"}},
		{"version": {"1.2.0"}},
		{"metadata.region": {"eu", "us"}},
		{"metadata.nope": {"x"}},
		{"trustManifest.attestations.type": {"SOC2"}},
		{"trustManifest.identityType": {"x509"}},
		{"tags": {"weather"}, "type": {"mcp"}},
		{"publisher": {"maps.example"}, "tags": {"billing"}},
		{"type": {}, "tags": {""}},
	}
	for _, f := range filters {
		res, err := ix.Search(context.Background(), index.SearchRequest{Filter: f, Size: 100})
		if err != nil {
			t.Fatal(err)
		}
		var want, got []string
		for _, h := range res.Hits {
			want = append(want, h.ID)
		}
		for i := range docs {
			if docs[i].Owner == "" && f.Matches(&docs[i]) { // the search is anonymous
				got = append(got, docs[i].ID)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("filter %v: Matches %v, search %v", f, got, want)
		}
	}
}

// TestCountPublic leaves private docs out.
func TestCountPublic(t *testing.T) {
	ix := mustOpenMemory(t)
	docs := fixture()
	docs[0].Owner = "weather.example"
	mustPut(t, ix, docs)
	public := 0
	for _, d := range docs {
		if d.Owner == "" {
			public++
		}
	}
	n, err := ix.CountPublic(context.Background())
	if err != nil || n != uint64(public) || public == len(docs) {
		t.Fatalf("CountPublic = %d, %v; want %d of %d", n, err, public, len(docs))
	}
}
