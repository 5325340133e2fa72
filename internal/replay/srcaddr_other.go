//go:build !linux

package replay

import "syscall"

// bindNoPort does nothing here: bind takes a port of its own.
func bindNoPort(network, address string, c syscall.RawConn) error { return nil }
