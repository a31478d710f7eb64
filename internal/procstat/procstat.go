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

// CPUTimeOf is the user plus system CPU time process pid has used so far,
// from /proc/PID/stat (Linux; USER_HZ is 100 there whatever the kernel's
// tick), 10 ms resolution; 0 where the system does not say. A load
// generator reads it for the server it measures.
func CPUTimeOf(pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// utime and stime are fields 14 and 15, the 12th and 13th after it.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(u+st) * 10 * time.Millisecond
}
