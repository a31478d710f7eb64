package registry_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/registry"
)

type planBody struct {
	Task  string `json:"task"`
	Steps []struct {
		Step       int      `json:"step"`
		Text       string   `json:"text"`
		Verb       string   `json:"verb"`
		Query      string   `json:"query"`
		After      []int    `json:"after"`
		Caps       []string `json:"capabilities"`
		Candidates []struct {
			Identifier string         `json:"identifier"`
			Visibility string         `json:"visibility"`
			Call       map[string]any `json:"call"`
			Price      *struct {
				PerCall  string `json:"perCall"`
				Protocol string `json:"protocol"`
				Network  string `json:"network"`
			} `json:"price"`
			Why struct {
				Matched []struct {
					Word string `json:"word"`
				} `json:"matched"`
			} `json:"why"`
		} `json:"candidates"`
	} `json:"steps"`
	Notice string `json:"notice"`
}

// TestPlan decomposes tasks over the default corpus: each row gives the
// expected steps (in order), what each must come after, and an entry each
// step's candidates must hold.
func TestPlan(t *testing.T) {
	f := newCorpusServer(t, registry.Config{})
	tests := []struct {
		name  string
		task  string
		after [][]int  // per step
		want  []string // per step: an identifier among its candidates
	}{
		{"one step", "weather forecast for Lisbon this weekend", [][]int{{}},
			[]string{"urn:air:weather.example-labs.dev:mcp:forecast"}},
		{"then", "Translate the contract into German, then send it by email to the client.", [][]int{{}, {1}},
			[]string{"urn:air:linguabridge.example:mcp:translate", "urn:air:quillmail.example:mcp:mail"}},
		{"and with a verb", "get the stock price of ACME and convert the amount to euros", [][]int{{}, {}},
			[]string{"urn:air:stocktick-data.example:api:getQuote", ""}},
		{"and without a verb stays one", "find restaurants and hotels in Porto", [][]int{{}}, []string{""}},
		{"after reverses", "Email the summary after you transcribe the meeting recording", [][]int{{}, {1}},
			[]string{"urn:air:skillshelf.example:writing:meeting-minutes", "urn:air:quillmail.example:mcp:mail"}},
		{"sentences", "Scan the repository for vulnerabilities. Finally, open a ticket with the findings.", [][]int{{}, {1}},
			[]string{"urn:air:securescan.example:mcp:scanner", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := mustJSON(t, map[string]any{"task": tc.task, "candidates": 5})
			status, out := f.do(t, http.MethodPost, "/plan", body)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, out)
			}
			var p planBody
			if err := json.Unmarshal(out, &p); err != nil {
				t.Fatal(err)
			}
			if len(p.Steps) != len(tc.after) {
				t.Fatalf("%d steps, want %d: %s", len(p.Steps), len(tc.after), out)
			}
			for i, st := range p.Steps {
				if st.Step != i+1 || !slices.Equal(st.After, tc.after[i]) {
					t.Errorf("step %d (%q): after %v, want %v", st.Step, st.Text, st.After, tc.after[i])
				}
				var got []string
				for _, c := range st.Candidates {
					got = append(got, c.Identifier)
					if c.Visibility != "public" || c.Call == nil {
						t.Errorf("candidate %+v", c)
					}
				}
				if tc.want[i] != "" && !slices.Contains(got, tc.want[i]) {
					t.Errorf("step %d (%q, query %q): candidates %v lack %s", st.Step, st.Text, st.Query, got, tc.want[i])
				}
				if tc.want[i] != "" && len(st.Candidates) > 0 && len(st.Candidates[0].Why.Matched) == 0 {
					t.Errorf("step %d: first candidate says no matched word", st.Step)
				}
			}
			if !strings.Contains(p.Notice, "chooses") || !strings.Contains(p.Notice, "verifies") {
				t.Errorf("notice %q", p.Notice)
			}
			// Deterministic: the same task gives the same plan.
			if _, again := f.do(t, http.MethodPost, "/plan", body); string(again) != string(out) {
				t.Errorf("second plan differs:\n%s\n%s", out, again)
			}
		})
	}
}

// TestPlanInvalid: empty, too long and non-text tasks are 422, naming task.
func TestPlanInvalid(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	for _, body := range []string{
		`{}`, `{"task":""}`, `{"task":"   "}`, `{"task":42}`, `{"task":["a"]}`, `{"task":{"text":"x"}}`,
		`{"task":"` + strings.Repeat("a", 2001) + `"}`, `{"task":"123 456"}`, `{"task":"bad \u0000 byte"}`,
		`{"task":"\ufffd\ufffd"}`, `{"task":"send mail","candidates":0}`, `{"task":"send mail","extra":1}`,
	} {
		status, out := f.do(t, http.MethodPost, "/plan", body)
		if status != http.StatusUnprocessableEntity {
			t.Errorf("%.60s: status %d: %s", body, status, out)
			continue
		}
		p := decodeProblem(t, out)
		if len(p.Errors) == 0 {
			t.Errorf("%.60s: no field errors", body)
		}
	}
}

// TestPlanPrivate: a private entry is a candidate only for its owner.
func TestPlanPrivate(t *testing.T) {
	viewer := func(r *http.Request) []string { return []string{r.Header.Get("X-Test-Viewer")} }
	f := newTestServer(t, registry.Config{Viewer: viewer}, nil)
	loadPrivate(t, f, "corp.test", `{"identifier":"urn:air:corp.test:payroll","displayName":"Payroll Runner","type":"application/mcp-server-card+json","url":"https://corp.test/card.json","description":"Runs the monthly payroll.","representativeQueries":["run payroll"]}`)
	for _, tc := range []struct {
		viewer string
		want   bool
	}{{"", false}, {"other.test", false}, {"corp.test", true}} {
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/plan", strings.NewReader(`{"task":"run the monthly payroll"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Test-Viewer", tc.viewer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p planBody
		_ = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		found := false
		for _, st := range p.Steps {
			for _, c := range st.Candidates {
				if c.Identifier == "urn:air:corp.test:payroll" {
					found = c.Visibility == "private"
				}
			}
		}
		if found != tc.want {
			t.Errorf("viewer %q: private candidate %v, want %v", tc.viewer, found, tc.want)
		}
	}
}

// TestPlanPrice: a candidate's price is the lowest of the payment options
// the entry states, read through the same normalisation the pay filters
// use; an entry that states none has no price.
func TestPlanPrice(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	loadEntries(t, f.db, f.ix, "paid", []string{
		`{"identifier":"urn:air:geo.test:geocode","displayName":"Geocoder","type":"application/mcp-server-card+json","url":"https://geo.test/card.json","description":"Turns a street address into coordinates.","metadata":{"pay.protocol":"x402","pay.network":"base","pay.price":"0.0020","pay.2.protocol":"x402","pay.2.network":"solana","pay.2.price":"0.00199"}}`,
		`{"identifier":"urn:air:geo.test:freegeo","displayName":"Free Geocoder","type":"application/mcp-server-card+json","url":"https://geo.test/free.json","description":"Turns a street address into coordinates for free."}`,
	})
	resp, err := http.Post(f.srv.URL+"/plan", "application/json", strings.NewReader(`{"task":"geocode a street address","candidates":5}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p planBody
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || len(p.Steps) == 0 {
		t.Fatalf("plan: %v %+v", err, p)
	}
	seen := 0
	for _, c := range p.Steps[0].Candidates {
		switch c.Identifier {
		case "urn:air:geo.test:geocode":
			seen++
			if c.Price == nil || c.Price.PerCall != "0.00199" || c.Price.Network != "solana" || c.Price.Protocol != "x402" {
				t.Errorf("paid candidate price %+v, want 0.00199 on solana over x402", c.Price)
			}
		case "urn:air:geo.test:freegeo":
			seen++
			if c.Price != nil {
				t.Errorf("free candidate has price %+v", c.Price)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("expected both geocoders among the candidates: %+v", p.Steps[0].Candidates)
	}
}

// BenchmarkPlan measures POST /plan of a three-step task over the default
// corpus (decomposition, three searches, candidates with reliability).
func BenchmarkPlan(b *testing.B) {
	f := newCorpusServer(b, registry.Config{})
	body := `{"task":"Translate the contract into German, then send it by email, and book a meeting with the client","candidates":5}`
	for b.Loop() {
		if status, out := f.do(b, http.MethodPost, "/plan", body); status != http.StatusOK {
			b.Fatalf("%d %s", status, out)
		}
	}
}
