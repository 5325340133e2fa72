package synth

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDistMoments draws many samples from every distribution and checks
// the sample mean against the law's mean within 5 standard errors
// (sqrt(variance/n), the variance taken from the law), and every sample
// against the law's support.
func TestDistMoments(t *testing.T) {
	ln, err := LognormalByAverage(1000, 0.85)
	if err != nil {
		t.Fatal(err)
	}
	zipf := Zipf{Alpha: 2, Max: 100}
	zipfVar := func() float64 { // E[X^2] - mean^2 over 1..Max
		var m2, den float64
		for k := 1.0; k <= 100; k++ {
			p := math.Pow(k, -2)
			m2 += k * k * p
			den += p
		}
		m := zipf.Mean()
		return m2/den - m*m
	}()
	cases := []struct {
		d        Dist
		mean     float64
		variance float64
		lo, hi   float64
		integer  bool
	}{
		{Constant{V: 7}, 7, 0, 7, 7, true},
		{Uniform{Min: 200, Max: 400, Int: true}, 300, (201*201 - 1) / 12.0, 200, 400, true},
		{Uniform{Min: 0.5, Max: 2.5}, 1.5, 4 / 12.0, 0.5, 2.5, false},
		{zipf, zipf.Mean(), zipfVar, 1, 100, true},
		{Poisson{Lambda: 3.5}, 3.5, 3.5, 0, math.Inf(1), true},
		{Poisson{Lambda: 250}, 250, 250, 0, math.Inf(1), true},
		{ln, 1000, (math.Exp(ln.Sigma*ln.Sigma) - 1) * 1000 * 1000, 0, math.Inf(1), false},
		{Lognormal{Mu: 1, Sigma: 0.5}, math.Exp(1.125), (math.Exp(0.25) - 1) * math.Exp(2.25), 0, math.Inf(1), false},
		{Exponential{M: 2}, 2, 4, 0, math.Inf(1), false},
		{Gamma{Shape: 0.5, Scale: 4}, 2, 8, 0, math.Inf(1), false},
		{Gamma{Shape: 3, Scale: 0.2}, 0.6, 0.12, 0, math.Inf(1), false},
		{UserTurns{Messages: Uniform{Min: 30, Max: 40, Int: true}}, 195.0 / 11, -1, 15, 20, true},
	}
	const n = 200000
	for _, c := range cases {
		t.Run(c.d.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var sum, sum2 float64
			for range n {
				x := c.d.Sample(r)
				if x < c.lo || x > c.hi || math.IsNaN(x) {
					t.Fatalf("sample %g outside [%g, %g]", x, c.lo, c.hi)
				}
				if c.integer && x != math.Trunc(x) {
					t.Fatalf("sample %g is not an integer", x)
				}
				sum += x
				sum2 += x * x
			}
			mean := sum / n
			variance := c.variance
			if variance < 0 { // not stated: use the sample's
				variance = sum2/n - mean*mean
			}
			tol := 5*math.Sqrt(variance/n) + 1e-12
			if math.Abs(mean-c.mean) > tol {
				t.Fatalf("sample mean %g, want %g ± %g", mean, c.mean, tol)
			}
			if c.variance > 0 {
				sv := sum2/n - mean*mean
				if math.Abs(sv-c.variance) > 0.1*c.variance {
					t.Fatalf("sample variance %g, want %g within 10%%", sv, c.variance)
				}
			}
		})
	}
}

func TestUserTurnsFollowsVLLMRounding(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for msgs, want := range map[float64]float64{0: 1, 1: 1, 2: 1, 3: 2, 4: 2, 29: 15, 30: 15, 31: 16, 40: 20} {
		if got := (UserTurns{Messages: Constant{V: msgs}}).Sample(r); got != want {
			t.Errorf("num_turns %g: %g user turns, want %g", msgs, got, want)
		}
	}
	seen := map[float64]bool{}
	d := UserTurns{Messages: Uniform{Min: 30, Max: 40, Int: true}}
	for range 2000 {
		seen[d.Sample(r)] = true
	}
	for k := 15.0; k <= 20; k++ {
		if !seen[k] {
			t.Errorf("num_turns 30-40 never gave %g user turns", k)
		}
	}
	if len(seen) != 6 {
		t.Errorf("num_turns 30-40 gave %d distinct user-turn counts, want 6 (15..20)", len(seen))
	}
}

func TestBoundedClamps(t *testing.T) {
	d, err := ParseDist("lognormal:average=1000,max=1500,min=900", Count)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	hitLo, hitHi := false, false
	for range 10000 {
		x := d.Sample(r)
		if x < 900 || x > 1500 {
			t.Fatalf("sample %g outside [900, 1500]", x)
		}
		hitLo = hitLo || x == 900
		hitHi = hitHi || x == 1500
	}
	if !hitLo || !hitHi {
		t.Fatalf("clamps never reached: low %v high %v", hitLo, hitHi)
	}
}

func TestParseDist(t *testing.T) {
	ok := map[string]string{
		"300":                                   "constant(300)",
		"200-400":                               "uniform(200..400)",
		"constant:value=5":                      "constant(5)",
		"uniform:min=1,max=3":                   "uniform(1..3)",
		"zipf:alpha=1.5,max=40":                 "zipf(alpha=1.5, max=40)",
		"poisson:alpha=10":                      "poisson(10)",
		"poisson:lambda=4":                      "poisson(4)",
		"exponential:mean=20":                   "exponential(mean=20)",
		"gamma:shape=2,scale=3":                 "gamma(shape=2, scale=3)",
		"gamma:shape=2,mean=10":                 "gamma(shape=2, scale=5)",
		"lognormal:mean=-1,sigma=0.5":           "lognormal(mu=-1, sigma=0.5",
		"lognormal:average=100":                 "lognormal(mu=4.44",
		"Uniform: min = 1 , max = 2":            "uniform(1..2)",
		"lognormal:average=100,median_ratio=.5": "lognormal(mu=3.91",
	}
	for spec, want := range ok {
		d, err := ParseDist(spec, Count)
		if err != nil {
			t.Errorf("%q: %v", spec, err)
			continue
		}
		if !strings.HasPrefix(d.String(), want) {
			t.Errorf("%q parsed as %s, want %s", spec, d, want)
		}
	}
	durations := map[string]float64{"2s": 2, "500ms": 0.5, "1.5": 1.5, "exponential:mean=250ms": 0.25}
	for spec, mean := range durations {
		d, err := ParseDist(spec, Seconds)
		if err != nil {
			t.Errorf("%q: %v", spec, err)
			continue
		}
		if math.Abs(d.Mean()-mean) > 1e-9 {
			t.Errorf("%q: mean %g s, want %g", spec, d.Mean(), mean)
		}
	}
	if d, err := ParseDist("1s-3s", Seconds); err != nil || d.(Uniform).Int || d.Mean() != 2 {
		t.Errorf("1s-3s: %v %v", d, err)
	}
	bad := map[string]string{
		"":                                      "empty",
		"400-200":                               "min 400 > max 200",
		"banana:x=1":                            "unknown distribution",
		"zipf:alpha=0.5":                        "must be > 1",
		"uniform:min=1":                         "missing parameter max",
		"poisson:alpha=3,beta=4":                "unknown parameter",
		"lognormal:average=10,median_ratio=1.5": "median_ratio",
		"-5":                                    "negative",
		"abc":                                   "not a number",
		"gamma:shape=0,scale=1":                 "shape",
		"lognormal:average=10,min=20,max=5":     "min 20 > max 5",
		"uniform:min=1;max=2":                   "not a number",
	}
	for spec, want := range bad {
		_, err := ParseDist(spec, Count)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", spec, err, want)
		}
	}
	if _, err := ParseDist("2parsecs", Seconds); err == nil {
		t.Error("2parsecs accepted as a duration")
	}
}

const vllmExample = `{
    "filetype": "generate_conversations",
    "num_conversations": 24,
    "text_files": ["pg1184.txt"],
    "print_stats": false,
    "prompt_input": {
        "num_turns": {"distribution": "uniform", "min": 12, "max": 18},
        "common_prefix_num_tokens": {"distribution": "constant", "value": 500},
        "prefix_num_tokens": {"distribution": "lognormal", "average": 1000, "max": 5000},
        "num_tokens": {"distribution": "uniform", "min": 120, "max": 160}
    },
    "prompt_output": {
        "num_tokens": {"distribution": "uniform", "min": 80, "max": 120}
    }
}`

func TestReadVLLMConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gen.json")
	if err := os.WriteFile(path, []byte(vllmExample), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := ReadVLLMConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Conversations != 24 || len(c.TextFiles) != 1 {
		t.Fatalf("conversations %d text files %v", c.Conversations, c.TextFiles)
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 1000 {
		if u := c.Turns.Sample(r); u < 6 || u > 9 {
			t.Fatalf("num_turns 12-18 gave %g user turns, want 6..9", u)
		}
		if p := c.PrefixTokens.Sample(r); p > 5000 {
			t.Fatalf("prefix %g above max 5000", p)
		}
	}
	if c.CommonPrefixTokens.Mean() != 500 || c.InputTokens.Mean() != 140 || c.OutputTokens.Mean() != 100 {
		t.Fatalf("means: common %g input %g output %g", c.CommonPrefixTokens.Mean(), c.InputTokens.Mean(), c.OutputTokens.Mean())
	}

	bad := map[string]string{
		`{"prompt_input": {"num_turns": {"distribution": "uniform", "min": 5}}, "prompt_output": {}}`: "prompt_input.num_turns: ",
		`{"prompt_input": {"num_turns": {"distribution": "weird"}}, "prompt_output": {}}`:             "unknown distribution",
		"{\n  \"prompt_input\": {\n    \"num_turns\": [1,\n  }\n}":                                    "line 4",
		`{"prompt_input": {"num_turns": {"distribution": "constant", "value": 4}}}`:                   "prompt_output: missing",
		`{"num_conversations": 0, "prompt_input": {}, "prompt_output": {}}`:                           "num_conversations",
	}
	for text, want := range bad {
		p := filepath.Join(dir, "bad.json")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadVLLMConfig(p)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s:\nerror %v, want one naming the file and %q", text, err, want)
		}
	}
	if _, err := ReadVLLMConfig(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
}
