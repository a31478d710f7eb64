package registry

import (
	"testing"
	"unicode/utf8"
)

// FuzzPlanDecode: a POST /plan body is either a problem (400/422 with field
// errors) or a task of valid text within bounds.
func FuzzPlanDecode(f *testing.F) {
	seeds := []string{
		`{"task":"get the weather, then email it","candidates":5}`, `{"task":""}`, `{"task":42}`,
		`{"task":"\u0000"}`, `{"task":"ok","candidates":11}`, `{"task":"ok","x":1}`, `[]`, ``, `{"task":"\ud800"}`,
	}
	fuzzDecode(f, seeds, (*Service).parsePlan, func(t *testing.T, req planRequest) {
		if req.Task == "" || len(req.Task) > maxPlanTaskBytes || !utf8.ValidString(req.Task) || !isPlainText(req.Task) ||
			req.Candidates < 1 || req.Candidates > maxPlanCandidates {
			t.Fatalf("accepted an invalid request: %+v", req)
		}
	})
}
