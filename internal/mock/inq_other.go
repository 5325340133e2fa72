//go:build !linux

package mock

// ioctlInQueue asks a socket how many received bytes wait unread: FIONREAD,
// _IOR('f', 127, int) on macOS and the BSDs (golang.org/x/sys/unix does not
// name it there; TIOCINQ is Linux's name).
const ioctlInQueue = 0x4004667f
