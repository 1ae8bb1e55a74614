//go:build !linux

package itest

import "syscall"

// sysProcAttr puts a child in its own process group; cred, if not nil, is
// the user it runs as. (Only Linux can also have it killed when the test
// binary dies.)
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}

// groupHasOthers cannot tell without /proc, so it reports false: leftovers
// of an exited leader's group are not killed.
func groupHasOthers(int) bool { return false }
