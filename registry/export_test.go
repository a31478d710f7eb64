package registry

import (
	"fmt"
	"slices"
	"strings"
)

// ProbeTargetReads reports how many times s has read its probe targets
// from every entry.
func ProbeTargetReads(s *Service) int {
	s.prober.targetsMu.Lock()
	defer s.prober.targetsMu.Unlock()
	return s.prober.targetReads
}

// ProbeState summarises s's probe targets, one line each: a target's
// entries and MCP tools, each paid entry's target and terms, each entry
// that may learn terms. With fresh, every entry is read first, as after
// a restart; without, the targets are brought up to date as the probes
// and the reconciliation bring them.
func ProbeState(s *Service, fresh bool) (string, error) {
	p := s.prober
	if fresh {
		p.targetsMu.Lock()
		p.probes, p.targets = nil, nil
		p.targetsMu.Unlock()
	}
	if _, err := s.probeTargets(); err != nil {
		return "", err
	}
	p.targetsMu.Lock()
	defer p.targetsMu.Unlock()
	_, groups, _, _ := s.buildTargets(p.probes)
	var lines []string
	for name, g := range groups {
		lines = append(lines, fmt.Sprintf("target %s %v tools %v", name, g.ids, g.toolIDs))
	}
	for id, c := range p.payClaims {
		var fps []string
		for _, o := range c.terms {
			fps = append(fps, o.Fingerprint())
		}
		lines = append(lines, fmt.Sprintf("claim %s %s %v", id, c.target, fps))
	}
	for id, target := range p.payLearn {
		lines = append(lines, fmt.Sprintf("learn %s %s", id, target))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), nil
}
