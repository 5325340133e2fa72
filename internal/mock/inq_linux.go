//go:build linux

package mock

import "golang.org/x/sys/unix"

// ioctlInQueue asks a socket how many received bytes wait unread.
const ioctlInQueue = unix.TIOCINQ
