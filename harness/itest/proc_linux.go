package itest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr puts a child in its own process group and has the kernel kill
// it when the test binary dies; cred, if not nil, is the user it runs as.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
}

// groupHasOthers reports whether a process other than pgid itself is in
// process group pgid, from /proc.
func groupHasOthers(pgid int) bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 3 {
			continue
		}
		pid, _ := strconv.Atoi(strings.Fields(s)[0])
		if pgrp, _ := strconv.Atoi(fields[2]); pgrp == pgid && pid != pgid {
			return true
		}
	}
	return false
}
