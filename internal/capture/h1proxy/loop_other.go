//go:build !linux

package h1proxy

import (
	"errors"
	"net"
)

// evloop is Linux's (epoll); elsewhere every body is forwarded by its
// request's goroutine.
type evloop struct{}

func newEvloops(int, *loopStats) []*evloop { return nil }

func (*evloop) close() {}

func (*evloop) own(net.Conn) (upSock, error) { return nil, errors.ErrUnsupported }

// rawSock is Linux's (an evloop's socket); none is made elsewhere.
type rawSock struct{ netSock }

func (b *rawBody) viaLoop(*rawSock) bool { return false }

func (b *rawBody) headOnLoop(*rawSock, *upConn, []byte) bool { return false }

func rawWrite(int, []byte) (int, error) { return 0, errors.ErrUnsupported }

// shutdownConn closes c (the watcher's abort).
func shutdownConn(c net.Conn) func() { return func() { c.Close() } }
