package fielderr

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// A message names fields by their Go names; Text names them as a front end
// asks; a message naming none is about its field; wrapping keeps the
// chain.
func TestError(t *testing.T) {
	flag := func(f string) string { return "--" + strings.ToLower(f) }
	for _, c := range []struct {
		err        *Error
		msg, text  string
		namesField bool
	}{
		{Errorf("x.Config", "Targets", "no %s given", Name("Targets")), "no Targets given", "no --targets given", true},
		{Errorf("x.Config", "Shard", "%s %d/%d: expected 0 <= index < %s", Name("Shard"), 3, 2, Name("Shards")),
			"Shard 3/2: expected 0 <= index < Shards", "--shard 3/2: expected 0 <= index < --shards", true},
		{Errorf("x.Options", "Count", "%d sessions, want at least 1", 0), "Count: 0 sessions, want at least 1", "0 sessions, want at least 1", false},
		{Errorf("x.Config", "Speed", "%s %v: %w", Name("Speed"), "{\"a\":1}", io.EOF), `Speed {"a":1}: EOF`, `--speed {"a":1}: EOF`, true},
	} {
		if got := c.err.Error(); got != c.msg {
			t.Errorf("Error() = %q, want %q", got, c.msg)
		}
		if got := c.err.Text(flag); got != c.text {
			t.Errorf("Text = %q, want %q", got, c.text)
		}
		if c.err.NamesFields() != c.namesField {
			t.Errorf("%q: NamesFields %v", c.msg, !c.namesField)
		}
	}
	inner := Errorf("y.Config", "Stamp", "%s %q: expected one of a, b", Name("Stamp"), "c")
	outer := fmt.Errorf("step 2: %w", Errorf("x.Config", "Stamps", "%s value %q (#%d): %w", Name("Stamps"), "c", 1, inner))
	if !errors.Is(outer, inner) {
		t.Error("the chain lost the inner error")
	}
	var fe *Error
	if !errors.As(outer, &fe) || fe.Field != "Stamps" {
		t.Errorf("As found %+v", fe)
	}
	all := All(outer)
	if len(all) != 2 || all[0].Field != "Stamps" || all[1].Field != "Stamp" {
		t.Errorf("All: %v", all)
	}
	if want := `step 2: Stamps value "c" (#1): Stamp "c": expected one of a, b`; outer.Error() != want {
		t.Errorf("%q, want %q", outer.Error(), want)
	}
}
