package safety

import (
	"sort"
	"strings"
)

// ToolFindings is the scan result of one tool, as the caller stored it.
type ToolFindings struct {
	// Domain is the publisher domain of the server (used by Filter.Domain).
	Domain   string    `json:"domain"`
	Server   string    `json:"server"`
	Tool     string    `json:"tool"`
	Findings []Finding `json:"findings"`
}

// Filter narrows a Summarize report. The zero value keeps everything.
type Filter struct {
	// Domain keeps tools whose domain is this domain or a subdomain of it
	// (case-insensitive).
	Domain string
	// Rule keeps only this rule id.
	Rule string
	// MaxExamples bounds the examples per rule; 0 means DefaultExamples,
	// and it is capped at MaxExamples.
	MaxExamples int
}

// Example bounds for Summarize.
const (
	DefaultExamples = 5
	MaxExamples     = 50
)

// Report is what GET /tool-safety shows: how many findings of each rule
// there are and what they say. It deliberately has no score, no severity and
// no ranking of tools or servers.
type Report struct {
	// Tools is how many tools passed the filter; ToolsWithFindings how
	// many of them have at least one finding (of the filtered rule).
	Tools             int `json:"tools"`
	ToolsWithFindings int `json:"toolsWithFindings"`
	// Rules has one entry per rule (only the filtered one when Filter.Rule
	// is set), in the order of Rules().
	Rules []RuleSummary `json:"rules"`
}

// RuleSummary counts one rule's findings and quotes some of them.
type RuleSummary struct {
	Rule string `json:"rule"`
	Why  string `json:"why"`
	// Findings counts matches; Tools counts tools with at least one.
	// Findings in server instructions count once per server, not once per
	// tool of that server.
	Findings int       `json:"findings"`
	Tools    int       `json:"tools"`
	Examples []Example `json:"examples"`
}

// Example is one quoted finding.
type Example struct {
	Domain  string `json:"domain,omitempty"`
	Server  string `json:"server"`
	Tool    string `json:"tool"`
	Field   string `json:"field"`
	Excerpt string `json:"excerpt"`
}

// Summarize aggregates per-tool findings into a Report. Examples are taken
// at most one per tool per rule, tools in (domain, server, tool) order, so
// the same input always gives the same report and one noisy tool cannot
// fill every example slot. An unknown Filter.Rule yields a report with no
// rules.
func Summarize(all []ToolFindings, f Filter) Report {
	maxEx := f.MaxExamples
	if maxEx <= 0 {
		maxEx = DefaultExamples
	}
	maxEx = min(maxEx, MaxExamples)
	domain := strings.ToLower(strings.TrimSuffix(f.Domain, "."))

	tools := make([]ToolFindings, 0, len(all))
	for _, tf := range all {
		if domain == "" || inDomain(strings.ToLower(tf.Domain), domain) {
			tools = append(tools, tf)
		}
	}
	sort.SliceStable(tools, func(i, j int) bool {
		a, b := tools[i], tools[j]
		if a.Domain != b.Domain {
			return a.Domain < b.Domain
		}
		if a.Server != b.Server {
			return a.Server < b.Server
		}
		return a.Tool < b.Tool
	})

	var rep Report
	rep.Tools = len(tools)
	index := map[string]int{}
	for _, r := range Rules() {
		if f.Rule != "" && r.ID != f.Rule {
			continue
		}
		index[r.ID] = len(rep.Rules)
		rep.Rules = append(rep.Rules, RuleSummary{Rule: r.ID, Why: r.Why, Examples: []Example{}})
	}

	// Server instructions repeat on every tool of the server: count each
	// instruction finding once per server.
	type instrKey struct {
		server, rule string
		start, end   int
	}
	seenInstr := map[instrKey]bool{}
	for _, tf := range tools {
		hit := map[string]bool{}
		for _, fd := range tf.Findings {
			i, ok := index[fd.Rule]
			if !ok {
				continue
			}
			if fd.Field == "instructions" {
				k := instrKey{tf.Server, fd.Rule, fd.Start, fd.End}
				if seenInstr[k] {
					continue
				}
				seenInstr[k] = true
			}
			rs := &rep.Rules[i]
			rs.Findings++
			if !hit[fd.Rule] {
				hit[fd.Rule] = true
				rs.Tools++
				if len(rs.Examples) < maxEx {
					rs.Examples = append(rs.Examples, Example{Domain: tf.Domain, Server: tf.Server, Tool: tf.Tool, Field: fd.Field, Excerpt: fd.Excerpt})
				}
			}
		}
		if len(hit) > 0 {
			rep.ToolsWithFindings++
		}
	}
	return rep
}

// inDomain reports whether d is want or a subdomain of it.
func inDomain(d, want string) bool {
	d = strings.TrimSuffix(d, ".")
	return d == want || strings.HasSuffix(d, "."+want)
}
