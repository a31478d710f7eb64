package safety_test

import (
	"testing"

	"github.com/ardx-dev/ardx/registry/safety"
)

// BenchmarkScanCorpus scans the 8,010 toolsdk descriptions once per
// iteration (skipped where the shared data is absent).
func BenchmarkScanCorpus(b *testing.B) {
	tools := loadToolsdk(b)
	b.ResetTimer()
	for b.Loop() {
		for _, t := range tools {
			safety.Scan(t)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(tools)), "ns/tool")
}
