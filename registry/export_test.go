package registry

// ProbeTargetReads reports how many times s has read its probe targets
// from every entry.
func ProbeTargetReads(s *Service) int {
	s.prober.targetsMu.Lock()
	defer s.prober.targetsMu.Unlock()
	return s.prober.targetReads
}
