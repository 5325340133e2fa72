package mock

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// FaultHeader is the request header that forces a fault; see the package doc.
const FaultHeader = "X-Tracekit-Fault"

// Fault kinds.
const (
	FaultNone        = ""
	FaultStatus      = "status"      // an HTTP error status with a JSON body
	FaultReset       = "reset"       // TCP reset before any response byte
	FaultDisconnect  = "disconnect"  // connection closed after After events
	FaultStall       = "stall"       // a pause of For after After events
	FaultMalformed   = "malformed"   // an invalid JSON event after After events
	FaultNoDone      = "nodone"      // the stream ends without data: [DONE]
	FaultSlowHeaders = "slowheaders" // response headers delayed by For
	FaultNoHeaders   = "noheaders"   // the request is read, then nothing is ever sent
	FaultGzip        = "gzip"        // the response is gzip-compressed whatever Accept-Encoding said
	FaultJSON        = "json"        // a stream=true request gets a non-streaming JSON body
	FaultError       = "error"       // the API's in-stream error event after After events (a body: a 500 error)
	FaultCloseAfter  = "closeafter"  // the connection is closed after the response, without Connection: close
	FaultIdleClose   = "idleclose"   // the connection is closed once idle for For after the response
)

// Fault is one injected failure.
type Fault struct {
	Kind   string
	Status int           // FaultStatus: 429, 500 or 503
	After  int           // disconnect, stall, malformed: after this many events
	For    time.Duration // stall, slowheaders, idleclose
}

// String is the canonical header form, as recorded in the log.
func (f Fault) String() string {
	switch f.Kind {
	case FaultStatus:
		return "status=" + strconv.Itoa(f.Status)
	case FaultDisconnect:
		return "disconnect=" + strconv.Itoa(f.After)
	case FaultStall:
		return "stall=" + f.For.String() + "@" + strconv.Itoa(f.After)
	case FaultMalformed:
		return "malformed@" + strconv.Itoa(f.After)
	case FaultError:
		return "error@" + strconv.Itoa(f.After)
	case FaultSlowHeaders:
		return "slowheaders=" + f.For.String()
	case FaultIdleClose:
		return "idleclose=" + f.For.String()
	}
	return f.Kind
}

// ParseFault parses the X-Tracekit-Fault header value:
//
//	status=429|500|503  reset  disconnect=N  stall=DUR[@N]  malformed[@N]
//	error[@N]  nodone  slowheaders=DUR  noheaders  gzip  json  closeafter  idleclose=DUR
//
// N counts events (as the log lists them) sent before the fault; it
// defaults to 1 for stall, malformed and error.
func ParseFault(s string) (Fault, error) {
	s = strings.TrimSpace(s)
	kind, rest := s, ""
	if i := strings.IndexAny(s, "=@"); i >= 0 {
		kind, rest = s[:i], s[i:]
	}
	arg, at, hasAt := strings.TrimPrefix(rest, "="), "", false
	if i := strings.IndexByte(arg, '@'); i >= 0 {
		arg, at, hasAt = arg[:i], arg[i+1:], true
	}
	hasArg := strings.HasPrefix(rest, "=")
	bad := func(why string) (Fault, error) {
		return Fault{}, fmt.Errorf("%s %q: %s (want status=429|500|503, reset, disconnect=N, stall=DUR[@N], malformed[@N], error[@N], nodone, slowheaders=DUR, noheaders, gzip, json, closeafter or idleclose=DUR)", FaultHeader, s, why)
	}
	f := Fault{Kind: kind, After: 1}
	if hasAt {
		n, err := strconv.Atoi(at)
		if err != nil || n < 0 {
			return bad("@N must be a non-negative event count")
		}
		f.After = n
	}
	switch kind {
	case FaultStatus:
		n, err := strconv.Atoi(arg)
		if !hasArg || err != nil || (n != 429 && n != 500 && n != 503) || hasAt {
			return bad("status must be 429, 500 or 503")
		}
		f.Status = n
	case FaultReset, FaultNoDone, FaultNoHeaders, FaultGzip, FaultJSON, FaultCloseAfter:
		if hasArg || hasAt {
			return bad(kind + " takes no argument")
		}
	case FaultDisconnect:
		n, err := strconv.Atoi(arg)
		if !hasArg || err != nil || n < 0 || hasAt {
			return bad("disconnect needs =N, a non-negative event count")
		}
		f.After = n
	case FaultStall, FaultSlowHeaders:
		d, err := time.ParseDuration(arg)
		if !hasArg || err != nil || d < 0 {
			return bad(kind + " needs =DURATION such as 2s")
		}
		if kind == FaultSlowHeaders && hasAt {
			return bad("slowheaders takes no @N")
		}
		f.For = d
	case FaultIdleClose:
		d, err := time.ParseDuration(arg)
		if !hasArg || err != nil || d <= 0 || hasAt {
			return bad("idleclose needs =DURATION above 0 such as 5s, and no @N")
		}
		f.For = d
	case FaultMalformed, FaultError:
		if hasArg {
			return bad(kind + " takes only @N")
		}
	default:
		return bad("unknown fault kind")
	}
	switch kind {
	case FaultDisconnect, FaultStall, FaultMalformed, FaultError:
	default:
		f.After = 0 // not positional
	}
	return f, nil
}

// drawFault picks at most one fault with the configured probabilities;
// positional faults land uniformly on one of the events.
func drawFault(rng *rand.Rand, r FaultRates, events int) Fault {
	if r.sum() == 0 {
		return Fault{}
	}
	u := rng.Float64()
	at := 1 + rng.IntN(max(events, 1))
	for _, c := range []struct {
		p float64
		f Fault
	}{
		{r.Status429, Fault{Kind: FaultStatus, Status: 429}},
		{r.Status500, Fault{Kind: FaultStatus, Status: 500}},
		{r.Status503, Fault{Kind: FaultStatus, Status: 503}},
		{r.Reset, Fault{Kind: FaultReset}},
		{r.Disconnect, Fault{Kind: FaultDisconnect, After: at - 1}},
		{r.Stall, Fault{Kind: FaultStall, After: at, For: r.StallFor.D()}},
		{r.Malformed, Fault{Kind: FaultMalformed, After: at}},
		{r.NoDone, Fault{Kind: FaultNoDone}},
		{r.SlowHeaders, Fault{Kind: FaultSlowHeaders, For: r.SlowHeadersFor.D()}},
		{r.NoHeaders, Fault{Kind: FaultNoHeaders}},
		{r.Gzip, Fault{Kind: FaultGzip}},
		{r.JSON, Fault{Kind: FaultJSON}},
		{r.Error, Fault{Kind: FaultError, After: at}},
	} {
		if u < c.p {
			return c.f
		}
		u -= c.p
	}
	return Fault{}
}
