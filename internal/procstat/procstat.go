// Package procstat owns reading this process's own resource use (CPU time,
// resident memory), for benchmarks that report it next to their timings:
// on a shared machine wall time mostly measures the neighbours, CPU time
// what the code itself costs.
package procstat

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUTime is the user plus system CPU time this process has used so far;
// 0 where the system does not say.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// StatusKB reads a "kB" field of /proc/self/status, such as VmRSS or
// VmHWM (Linux); 0 elsewhere.
func StatusKB(field string) int {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	return 0
}
