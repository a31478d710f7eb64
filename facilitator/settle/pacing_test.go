package settle

import (
	"testing"
	"time"
)

// The receipt-poll pace follows observed inclusion times: the assumed time
// until one is seen, then a moving average in which one outlier weighs at
// most four times the average.
func TestInclusionTimeAverage(t *testing.T) {
	var n network
	if got := n.inclusionTime(20 * time.Millisecond); got != 20*time.Millisecond {
		t.Fatalf("before any observation = %v, want the assumed 20ms", got)
	}
	n.observeInclusion(10 * time.Millisecond)
	if got := n.inclusionTime(20 * time.Millisecond); got != 10*time.Millisecond {
		t.Fatalf("after one observation = %v, want 10ms", got)
	}
	for range 100 {
		n.observeInclusion(10 * time.Millisecond)
	}
	n.observeInclusion(10 * time.Minute) // a stuck transaction
	if got := n.inclusionTime(0); got > 14*time.Millisecond {
		t.Fatalf("one outlier moved the average to %v", got)
	}
	for range 100 {
		n.observeInclusion(2 * time.Second) // the chain really slowed down
	}
	if got := n.inclusionTime(0); got < 1900*time.Millisecond || got > 2*time.Second {
		t.Fatalf("after a sustained change = %v, want about 2s", got)
	}
}
