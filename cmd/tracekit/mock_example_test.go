package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
)

// exampleMockConfig is the mock configuration file docs/mock.md shows.
var exampleMockConfig = filepath.Join(repoRoot, "examples", "mock.json")

// The example loads through the mock's config loader, and every key it
// sets ends up in the configuration with the value it gives.
func TestExampleMockConfigLoads(t *testing.T) {
	cfg, err := mock.LoadConfig(exampleMockConfig, mock.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(exampleMockConfig)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var loaded map[string]any
	if err := json.Unmarshal(b, &loaded); err != nil {
		t.Fatal(err)
	}
	n := compareJSONLeaves(t, "", file, loaded)
	if n < 10 {
		t.Fatalf("the example sets only %d keys", n)
	}
}

// compareJSONLeaves checks that every leaf of want has the same value in
// got (durations compared as durations: "40us" is "40µs"), and returns how
// many leaves it checked.
func compareJSONLeaves(t *testing.T, path string, want, got map[string]any) int {
	t.Helper()
	n := 0
	for k, w := range want {
		p := strings.TrimPrefix(path+"."+k, ".")
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: %s is not a key of the loaded configuration", exampleMockConfig, p)
			continue
		}
		if wm, ok := w.(map[string]any); ok {
			gm, _ := g.(map[string]any)
			n += compareJSONLeaves(t, p, wm, gm)
			continue
		}
		n++
		if ws, ok := w.(string); ok {
			wd, err1 := time.ParseDuration(ws)
			gd, err2 := time.ParseDuration(g.(string))
			if err1 == nil && err2 == nil {
				if wd != gd {
					t.Errorf("%s: %s = %v in the file, %v loaded", exampleMockConfig, p, wd, gd)
				}
				continue
			}
		}
		if !reflect.DeepEqual(w, g) {
			t.Errorf("%s: %s = %v in the file, %v loaded", exampleMockConfig, p, w, g)
		}
	}
	return n
}

// `tracekit mock --config examples/mock.json` serves with the example's
// settings: its model is the one listed.
func TestMockServesExampleConfig(t *testing.T) {
	url, stop := startMock(t, tracekitBinary(t), "--config", exampleMockConfig)
	defer stop()
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &models); err != nil {
		t.Fatalf("/v1/models: %v: %s", err, body)
	}
	if len(models.Data) != 1 || models.Data[0].ID != "llama-3.1-8b-mock" {
		t.Fatalf("/v1/models lists %s, want the example's llama-3.1-8b-mock", body)
	}
}

// docs/mock.md documents every key of the mock's configuration file.
func TestDocMockConfigKeys(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "mock.md"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		for i := range ty.NumField() {
			f := ty.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			keys = append(keys, name)
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeFor[mock.Config]())
	if len(keys) < 20 {
		t.Fatalf("found only %d keys in mock.Config", len(keys))
	}
	for _, k := range keys {
		if !strings.Contains(string(page), "`"+k+"`") {
			t.Errorf("docs/mock.md does not document the key %q", k)
		}
	}
}
