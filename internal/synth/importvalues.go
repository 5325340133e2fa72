package synth

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// parseDecimalNs parses a non-negative decimal number of units ("12",
// "12.5", "1.25e3" is refused) into nanoseconds exactly: unitNs is the
// number of ns in one unit (1e9 for seconds, 1e6 for milliseconds).
// Fraction digits beyond ns resolution are truncated, never rounded through
// a float.
func parseDecimalNs(s string, unitNs int64) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty, expected a number")
	}
	neg := false
	if s[0] == '-' {
		neg, s = true, s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" && frac == "" {
		return 0, fmt.Errorf("%q is not a decimal number", s)
	}
	var whole int64
	if intPart != "" {
		v, err := strconv.ParseInt(intPart, 10, 64)
		if err != nil || intPart[0] == '+' {
			return 0, fmt.Errorf("%q is not a decimal number", s)
		}
		whole = v
	}
	if whole > (1<<62)/unitNs {
		return 0, fmt.Errorf("%q is too large", s)
	}
	ns := whole * unitNs
	// Each fraction digit is worth unitNs/10^k ns; stop once that is < 1 ns.
	step := unitNs
	for _, c := range frac {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a decimal number", s)
		}
		step /= 10
		ns += int64(c-'0') * step
	}
	if neg {
		ns = -ns
	}
	return ns, nil
}

// parseCount parses a non-negative integer token count; "12.0" is accepted
// because some CSV exports write integers as floats.
func parseCount(s string) (int, error) {
	s = strings.TrimSpace(s)
	if whole, frac, ok := strings.Cut(s, "."); ok && strings.Trim(frac, "0") == "" {
		s = whole
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a token count", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("%d is negative", v)
	}
	return int(v), nil
}

// parseWallNs parses an Azure timestamp to unix nanoseconds exactly:
// "2023-11-16 18:15:46.6805900" (2023: 7 fraction digits, no zone, taken as
// UTC), "2024-05-10 00:00:00.010419+00:00" and "2024-05-10 00:00:01+00:00"
// (2024: zone suffix, fraction sometimes absent). A 'T' separator and a 'Z'
// suffix are accepted too.
func parseWallNs(s string) (int64, error) {
	s = strings.TrimSpace(s)
	bad := func(why string) (int64, error) {
		return 0, fmt.Errorf("%q is not a timestamp YYYY-MM-DD hh:mm:ss[.fraction][+hh:mm]: %s", s, why)
	}
	if len(s) < 19 || (s[10] != ' ' && s[10] != 'T') {
		return bad("too short or no date/time separator")
	}
	base, err := time.Parse("2006-01-02 15:04:05", s[:10]+" "+s[11:19])
	if err != nil {
		return bad(err.Error())
	}
	rest := s[19:]
	var frac int64
	if strings.HasPrefix(rest, ".") {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 1 {
			return bad("empty fraction")
		}
		digits := rest[1:i]
		if len(digits) > 9 {
			digits = digits[:9]
		}
		frac, _ = strconv.ParseInt(digits+strings.Repeat("0", 9-len(digits)), 10, 64)
		rest = rest[i:]
	}
	var zone int64
	switch {
	case rest == "" || rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		hh, err1 := strconv.Atoi(rest[1:3])
		mm, err2 := strconv.Atoi(rest[4:6])
		if err1 != nil || err2 != nil {
			return bad("zone offset is not +hh:mm")
		}
		zone = int64(hh*3600+mm*60) * int64(time.Second)
		if rest[0] == '-' {
			zone = -zone
		}
	default:
		return bad(fmt.Sprintf("unexpected %q after the seconds", rest))
	}
	return base.UnixNano() + frac - zone, nil
}
