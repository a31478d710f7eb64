package ingest_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/registry/ingest"
)

// TestReportPrintListsWarnings: the summary names each warning, not just
// their number, capped per source like the rejections.
func TestReportPrintListsWarnings(t *testing.T) {
	var many []ingest.Problem
	for i := range 25 {
		many = append(many, ingest.Problem{Document: "big.json", Pointer: fmt.Sprintf("/entries/%d", i), Message: "updatedAt is stale"})
	}
	rep := &ingest.Report{Sources: []ingest.SourceReport{
		{Source: "a.json", Stored: 1, Warnings: []ingest.Problem{{Document: "a.json", Pointer: "", Message: "specVersion is missing"}}},
		{Source: "big.json", Stored: 25, Warnings: many},
	}}
	var buf bytes.Buffer
	rep.Print(&buf)
	out := buf.String()
	for _, want := range []string{"26 warning(s)", "warning a.json#(document): specVersion is missing",
		"warning big.json#/entries/19: updatedAt is stale", "... and 5 more warnings"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "/entries/20:") {
		t.Errorf("summary lists more than 20 warnings of one source:\n%s", out)
	}
}
