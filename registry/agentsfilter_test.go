package registry

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/index"
)

func TestParseAgentsFilter(t *testing.T) {
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		filter string
		want   index.ListRequest
	}{
		{"empty", "  ", index.ListRequest{}},
		{"type equals", `type="application/mcp-server-card+json"`,
			index.ListRequest{Types: []string{"application/mcp-server-card+json"}}},
		{"displayName has, bare", `displayName:weather`, index.ListRequest{DisplayName: []string{"weather"}}},
		{"commas are OR, spaces around", `type = "a/b" , "c/d"`, index.ListRequest{Types: []string{"a/b", "c/d"}}},
		{"AND joins fields, any case", `publisherId="a.test" and createdAfter="2026-01-01T00:00:00Z" AND displayName:"x \"y\" \\"`,
			index.ListRequest{Publishers: []string{"a.test"}, CreatedAfter: jan, DisplayName: []string{`x "y" \`}}},
		{"bare time with colons", `updatedAfter=2026-01-01T00:00:00Z`, index.ListRequest{UpdatedAfter: jan}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got index.ListRequest
			if err := parseAgentsFilter(tc.filter, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseAgentsFilterErrors(t *testing.T) {
	tests := []struct {
		filter     string
		wantOffset int
		wantMsg    string
	}{
		{`colour="red"`, 0, `unknown field "colour"`},
		{`type`, 4, `expected '=' or ':' after type, found end of filter`},
		{`type>"x"`, 4, `expected '=' or ':'`},
		{`type=`, 5, `expected a value, found end of filter`},
		{`type="abc`, 5, `quoted value is not closed`},
		{`type="a" OR type="b"`, 9, `expected AND, a comma or the end`},
		{`type="a" AND`, 12, `expected a field name`},
		{`type="a" AND type="b"`, 13, `field type appears twice`},
		{`createdAfter="yesterday"`, 13, `expected an RFC 3339 time`},
		{`createdAfter="2026-01-01T00:00:00Z","2026-02-01T00:00:00Z"`, 36, `takes one time`},
		{`type="a",`, 9, `expected a value`},
		{`"type"="a"`, 0, `expected a field name`},
		{`type="a\x"`, 7, `after a backslash`},
	}
	for _, tc := range tests {
		t.Run(tc.filter, func(t *testing.T) {
			var req index.ListRequest
			err := parseAgentsFilter(tc.filter, &req)
			if err == nil {
				t.Fatal("accepted")
			}
			if err.Offset != tc.wantOffset || !strings.Contains(err.Msg, tc.wantMsg) {
				t.Fatalf("got offset %d %q, want offset %d containing %q", err.Offset, err.Msg, tc.wantOffset, tc.wantMsg)
			}
		})
	}
}

func TestParseOrderBy(t *testing.T) {
	got, err := parseOrderBy(" displayName desc, updatedAt ASC ,identifier")
	if err != nil {
		t.Fatal(err)
	}
	want := []index.Order{{Field: "displayName", Desc: true}, {Field: "updatedAt"}, {Field: "identifier"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	for _, bad := range []string{"score", "displayName sideways", "displayName,", "createdAt createdAt", "identifier, identifier", "displayName DESC updatedAt"} {
		if _, err := parseOrderBy(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzAgentsFilter checks that the filter parser never panics and that an
// error always points inside the input.
func FuzzAgentsFilter(f *testing.F) {
	for _, s := range []string{
		`type="application/mcp-server-card+json"`, `displayName:"weather" AND publisherId=a.test,b.test`,
		`createdAfter="2026-01-01T00:00:00Z"`, `type="a\"b"`, `x`, `type=,`, `AND AND`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var req index.ListRequest
		if err := parseAgentsFilter(s, &req); err != nil {
			if err.Offset < 0 || err.Offset > len(s) {
				t.Fatalf("offset %d outside input of %d bytes", err.Offset, len(s))
			}
			return
		}
		if _, err := parseOrderBy(s); err != nil && (err.Offset < 0 || err.Offset > len(s)) {
			t.Fatalf("orderBy offset %d outside input", err.Offset)
		}
	})
}
