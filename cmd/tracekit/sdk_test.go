package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/trace"
)

// sdkReport is what testdata/sdk/check.mjs prints: the SDK versions and
// what each SDK made of its answer.
type sdkReport struct {
	OpenAI    string `json:"openai"`
	Anthropic string `json:"anthropic"`
	Checks    struct {
		Responses struct {
			ID        string         `json:"id"`
			Text      string         `json:"text"`
			Reasoning string         `json:"reasoning"`
			Events    map[string]int `json:"events"`
			Usage     struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
				Details      struct {
					Reasoning int `json:"reasoning_tokens"`
				} `json:"output_tokens_details"`
			} `json:"usage"`
		} `json:"responses"`
		Embeddings struct {
			Items int `json:"items"`
			Dims  int `json:"dims"`
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		} `json:"embeddings"`
		Chat struct {
			Text   string `json:"text"`
			Chunks int    `json:"chunks"`
			Usage  struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		} `json:"chat"`
		Messages struct {
			Text       string `json:"text"`
			Thinking   string `json:"thinking"`
			StopReason string `json:"stop_reason"`
			Usage      struct {
				InputTokens     int `json:"input_tokens"`
				CacheReadTokens int `json:"cache_read_input_tokens"`
				OutputTokens    int `json:"output_tokens"`
			} `json:"usage"`
		} `json:"messages"`
	} `json:"checks"`
}

// The official OpenAI and Anthropic SDKs accept what tracekit mock serves:
// a streamed Responses answer with reasoning and a second turn through
// previous_response_id, embeddings (base64, decoded by the SDK), a
// streamed chat completion, a streamed Messages answer with thinking
// (against --strict-anthropic, so the SDK's headers are checked too); what
// each SDK read agrees with the mock's ground-truth log. Opt-in: it needs
// Node.js and the SDKs (TRACEKIT_SDK_NODE names the folder holding their
// node_modules; `make sdk-check` sets it up).
func TestSDKsAgainstMock(t *testing.T) {
	modules := os.Getenv("TRACEKIT_SDK_NODE")
	if modules == "" {
		t.Skip("TRACEKIT_SDK_NODE not set: run make sdk-check")
	}
	logPath := filepath.Join(t.TempDir(), "truth.parquet")
	url, stop := startMock(t, tracekitBinary(t), "--strict-anthropic", "--output-mean", "12", "--output-cv", "0",
		"--prefill-base", "1ms", "--decode-base", "1ms", "--emit-log", logPath)
	rep := runSDKCheck(t, modules, url)
	stop()
	t.Logf("SDKs checked: openai %s, @anthropic-ai/sdk %s", rep.OpenAI, rep.Anthropic)
	rows, _, err := mock.ReadLog(logPath)
	if err != nil {
		t.Fatal(err)
	}
	log := map[string]mock.LogEntry{}
	for _, e := range rows {
		if e.Outcome != mock.OutcomeOK {
			t.Errorf("request %s (%s): outcome %s, status %d, %s", e.RequestID, e.Endpoint, e.Outcome, e.Status, e.Error)
		}
		log[e.RequestID] = e
	}
	c := rep.Checks

	r, e := c.Responses, log["sdk-responses"]
	if e.Endpoint != "responses" || r.ID != "resp_sdk-responses" || r.Usage.OutputTokens != int(e.CompletionTokens) ||
		r.Usage.Details.Reasoning != 3 || int(e.ReasoningTokens) != 3 || r.Usage.InputTokens != int(e.PromptTokens) ||
		len(strings.Fields(r.Reasoning)) != 3 || r.Events["response.reasoning_text.delta"]+r.Events["response.output_text.delta"] != len(e.EventMonoNs) ||
		r.Events["response.completed"] != 1 || int(e.FirstAnswerEvent) != 3 {
		t.Errorf("responses: the SDK read %+v; the log %+v", r, e)
	}
	if e2 := log["sdk-responses-2"]; e2.Messages != 3 { // turn 1's input and answer (its instructions do not carry over), then its own
		t.Errorf("responses, second turn: %d messages in the prompt, want turn 1's input and answer and its own input", e2.Messages)
	}

	m, e := c.Messages, log["sdk-messages"]
	if e.Endpoint != "messages" || m.StopReason != "end_turn" || m.Usage.OutputTokens != int(e.CompletionTokens) ||
		m.Usage.InputTokens+m.Usage.CacheReadTokens != int(e.PromptTokens) || m.Usage.CacheReadTokens != int(e.CachedTokens) ||
		len(strings.Fields(m.Thinking)) != 3 || len(strings.Fields(m.Text)) != int(e.CompletionTokens)-3-1 { // the end-of-text token has no text
		t.Errorf("messages: the SDK read %+v; the log %+v", m, e)
	}

	ch, e := c.Chat, log["sdk-chat"]
	if e.Endpoint != "chat" || ch.Usage.CompletionTokens != int(e.CompletionTokens) || ch.Usage.PromptTokens != int(e.PromptTokens) ||
		ch.Chunks != len(e.EventMonoNs)+1 { // the usage chunk has no choices
		t.Errorf("chat: the SDK read %+v; the log %+v", ch, e)
	}

	em, e := c.Embeddings, log["sdk-embeddings"]
	if e.Endpoint != "embeddings" || em.Items != 2 || int(e.Items) != 2 || em.Dims != mock.DefaultConfig().EmbeddingDimensions ||
		em.Usage.PromptTokens != int(e.PromptTokens) {
		t.Errorf("embeddings: the SDK read %+v; the log %+v", em, e)
	}
}

// runSDKCheck runs testdata/sdk/check.mjs with the SDKs in modules against
// base and returns its report.
func runSDKCheck(t *testing.T, modules, base string) sdkReport {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("testdata", "sdk", "check.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(modules, "tracekit-sdk-check.mjs") // beside node_modules, so its imports resolve
	if err := os.WriteFile(run, script, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("node", run, base).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node %s: %v\n%s%s", run, err, out, stderr)
	}
	var rep sdkReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("the check's report: %v\n%s", err, out)
	}
	return rep
}

// The same SDK calls through `tracekit capture` in front of the mock: the
// SDKs accept what they get through the proxy; the captured trace holds
// each API's requests with their endpoint (the Responses turns in one
// conversation, chained by previous_response_id); it replays against
// the mock with no error, each API's endpoint in the records; and neither
// SDK's API key is in any file capture or replay wrote. Opt-in, as
// TestSDKsAgainstMock.
func TestSDKsThroughCapture(t *testing.T) {
	modules := os.Getenv("TRACEKIT_SDK_NODE")
	if modules == "" {
		t.Skip("TRACEKIT_SDK_NODE not set: run make sdk-check")
	}
	bin := tracekitBinary(t)
	mockArgs := []string{"--strict-anthropic", "--output-mean", "12", "--output-cv", "0", "--prefill-base", "1ms", "--decode-base", "1ms"}
	up, stopUp := startMock(t, bin, mockArgs...)
	defer stopUp()
	out := t.TempDir()
	cmd := exec.Command(bin, "capture", "--listen", "127.0.0.1:0", "--upstream", up, "--out", out)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	var log strings.Builder
	logDone := make(chan struct{})
	go func() { // ends at the child's stderr EOF
		defer close(logDone)
		re := regexp.MustCompile(`^capture: (http://\S+) ->`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
	}()
	var base string
	select {
	case base = <-urls:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("capture printed no URL within 30 s")
	}
	rep := runSDKCheck(t, modules, base)
	t.Logf("SDKs checked through capture: openai %s, @anthropic-ai/sdk %s", rep.OpenAI, rep.Anthropic)
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { <-logDone; done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("capture: %v\n%s", err, log.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("capture did not stop within 30 s of SIGTERM")
	}
	if strings.Contains(log.String(), "not recorded") {
		t.Errorf("capture left requests unrecorded:\n%s", log.String())
	}
	traces, _ := filepath.Glob(filepath.Join(out, "*.trace.parquet"))
	recs, _ := filepath.Glob(filepath.Join(out, "*.recording.parquet"))
	if len(traces) != 1 || len(recs) != 1 {
		t.Fatalf("capture wrote %v %v", traces, recs)
	}
	want := map[string]int{"responses": 2, "embeddings": 1, "chat": 1, "messages": 1}
	got := map[string]int{}
	var chain []trace.Turn
	for _, turn := range readTurns(t, traces[0]) {
		ep := turn.Endpoint
		if ep == "" {
			ep = "chat"
		}
		got[ep]++
		if ep == "responses" {
			chain = append(chain, turn)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("captured turns by endpoint %v, want %v", got, want)
	}
	if len(chain) == 2 && (chain[0].ConversationID != chain[1].ConversationID || chain[1].Turn != 1) {
		t.Errorf("the Responses turns are not one conversation: %+v", chain)
	}
	got = map[string]int{}
	for _, r := range readRecords(t, recs[0]) {
		got[r.Endpoint]++
		if r.ErrorKind != "" {
			t.Errorf("captured %s request %s: %s %s", r.Endpoint, r.RequestID, r.ErrorKind, r.ErrorMessage)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("captured records by endpoint %v, want %v", got, want)
	}

	target, stopTarget := startMock(t, bin, mockArgs...)
	defer stopTarget()
	replayed := filepath.Join(out, "replayed.parquet")
	t.Setenv("TRACEKIT_SDK_TEST_KEY", "sk-ant-check")
	if _, stderr, code := runCLI(t, "replay", traces[0], "--target", target, "--api-key-env", "TRACEKIT_SDK_TEST_KEY",
		"--progress", "none", "--no-analyze", "-o", replayed); code != 0 {
		t.Fatalf("replay of the captured trace exited %d: %s", code, stderr)
	}
	got = map[string]int{}
	for _, r := range readRecords(t, replayed) {
		got[r.Endpoint]++
		if r.ErrorKind != "" {
			t.Errorf("replayed %s request %s: %s %s", r.Endpoint, r.RequestID, r.ErrorKind, r.ErrorMessage)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replayed records by endpoint %v, want %v", got, want)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"sk-check", "sk-ant-check"} {
			if bytes.Contains(b, []byte(key)) {
				t.Errorf("%s holds the API key %s", f, key)
			}
		}
	}
}
