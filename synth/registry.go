package synth

import (
	"fmt"
	"sort"
	"sync"

	"github.com/spf13/pflag"
	"github.com/tracekit/tracekit/tokenizer"
)

// Registration makes a Source available as `tracekit synth --source Name`.
// A source file registers itself from init:
//
//	func init() {
//		Register(Registration{Name: "mooncake", Summary: "...", Timed: true,
//			Flags: func(fs *pflag.FlagSet) { fs.Duration("start", 0, "...") },
//			New: func(env Env) (Source, error) { d, _ := env.Flags.GetDuration("start"); ... }})
//	}
//
// Flags of all registrations are added to the synth command; a flag name
// that several sources declare is added once (the first declaration wins,
// so declare shared flags identically). New reads its flags by name from
// env.Flags.
type Registration struct {
	Name    string
	Summary string // one line for --help
	// Flags declares the source's own flags; may be nil.
	Flags func(fs *pflag.FlagSet)
	// Timed is true when the source sets StartOffsetNs and ArrivalOffsetNs
	// itself (a production trace); otherwise the command's arrival
	// schedule (--rate, --burstiness) fills them.
	Timed bool
	New   func(env Env) (Source, error)
}

// Env is what the synth command hands a source.
type Env struct {
	Flags         *pflag.FlagSet // the command's flags, source flags included
	Input         string         // --input, empty if not given
	Conversations int            // --conversations if set, else 0 (the source's default)
	Seed          int64
	Tokenizer     tokenizer.Tokenizer
	// Corpus returns the text corpus (--text-file or the default), built
	// on first use.
	Corpus func() (*Corpus, error)
	// Progress reports work done of total units (bytes, rows) for a
	// progress line; never nil.
	Progress func(done, total int64)
}

// Reporter is implemented by sources that say what they did (rows read,
// records dropped and why). The command prints the report and stores it
// in the trace's metadata options.
type Reporter interface {
	Report() map[string]string
}

var registry struct {
	sync.Mutex
	byName map[string]Registration
}

// Register adds a source. It panics on a duplicate or incomplete
// registration: both are programming errors found at start-up.
func Register(r Registration) {
	registry.Lock()
	defer registry.Unlock()
	if r.Name == "" || r.New == nil {
		panic("synth: Register needs a Name and New")
	}
	if registry.byName == nil {
		registry.byName = map[string]Registration{}
	}
	if _, dup := registry.byName[r.Name]; dup {
		panic(fmt.Sprintf("synth: source %q registered twice", r.Name))
	}
	registry.byName[r.Name] = r
}

// Lookup returns the registration of name.
func Lookup(name string) (Registration, bool) {
	registry.Lock()
	defer registry.Unlock()
	r, ok := registry.byName[name]
	return r, ok
}

// Registrations lists every source, sorted by name.
func Registrations() []Registration {
	registry.Lock()
	defer registry.Unlock()
	out := make([]Registration, 0, len(registry.byName))
	for _, r := range registry.byName {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
