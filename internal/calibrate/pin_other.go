//go:build !linux

package calibrate

import "errors"

type pinning struct{}

func pinClient(n int, withMock bool) (*pinning, error) {
	return nil, errors.New("pinning the client to CPUs needs Linux")
}

func (p *pinning) pinMock(pid int) error      { return nil }
func (p *pinning) restore()                   {}
func (p *pinning) cpus() (client, mock []int) { return nil, nil }
