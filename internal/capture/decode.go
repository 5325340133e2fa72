package capture

import (
	"compress/gzip"
	"compress/zlib"
	"io"
)

// decodable reports whether the proxy can decode a response's
// Content-Encoding for parsing ("" and identity need no decoding).
func decodable(enc string) bool {
	switch enc {
	case "gzip", "x-gzip", "deflate":
		return true
	}
	return false
}

// decoder decompresses a compressed response for parsing while the raw
// bytes go to the client untouched. Decompression cannot resume after its
// source runs dry, so it runs on its own goroutine reading the chunks the
// forward loop hands over. The hand-over is a lock step: feed returns
// once the decoder has asked for the next chunk, that is, once it has
// delivered everything the previous chunk decoded to (a streaming
// server's flush ends a deflate block, so each event is out by then).
// Every decoded byte therefore carries the stamp of the network read that
// completed it, and the sink (the record.Stream) is never touched by two
// goroutines at once. The goroutine is owned by the forward call: finish
// ends it.
type decoder struct {
	in   chan stampedChunk
	ack  chan struct{}
	done chan struct{}
	err  error // a corrupt body, set before done closes

	cur      []byte
	stamp    int64
	pending  bool // a chunk was taken and feed still waits for its ack
	finished bool
}

type stampedChunk struct {
	b []byte
	t int64
}

// startDecoder starts decoding a body in enc, handing each decoded piece
// and the stamp of its read to sink.
func startDecoder(enc string, sink func(p []byte, stamp int64)) *decoder {
	d := &decoder{in: make(chan stampedChunk), ack: make(chan struct{}), done: make(chan struct{})}
	go d.run(enc, sink)
	return d
}

func (d *decoder) run(enc string, sink func([]byte, int64)) {
	defer close(d.done)
	defer d.drain()
	var zr io.Reader
	var err error
	if enc == "deflate" { // HTTP's deflate is the zlib format
		zr, err = zlib.NewReader(d)
	} else {
		zr, err = gzip.NewReader(d)
	}
	if err != nil {
		if err != io.EOF { // an empty body is no error
			d.err = err
		}
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := zr.Read(buf)
		if n > 0 {
			sink(buf[:n], d.stamp)
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			d.err = err
			return
		}
	}
}

// Read is the decompressor's source: the current chunk, then the next.
func (d *decoder) Read(p []byte) (int, error) {
	for len(d.cur) == 0 {
		if d.pending {
			d.pending = false
			d.ack <- struct{}{} // everything from the previous chunk is out
		}
		c, ok := <-d.in
		if !ok {
			return 0, io.EOF
		}
		d.cur, d.stamp, d.pending = c.b, c.t, true
	}
	n := copy(p, d.cur)
	d.cur = d.cur[n:]
	return n, nil
}

// drain keeps accepting chunks after the decoder stopped (a corrupt or
// finished body), so feed never blocks.
func (d *decoder) drain() {
	if d.pending {
		d.pending, d.cur = false, nil
		d.ack <- struct{}{}
	}
	for range d.in {
		d.ack <- struct{}{}
	}
}

// feed hands one network read to the decoder and returns once it has been
// decoded; b may be reused then.
func (d *decoder) feed(b []byte, stamp int64) {
	d.in <- stampedChunk{b, stamp}
	<-d.ack
}

// finish ends the body and waits for the decoder goroutine; it is safe to
// call more than once.
func (d *decoder) finish() error {
	if !d.finished {
		d.finished = true
		close(d.in)
		<-d.done
	}
	return d.err
}
