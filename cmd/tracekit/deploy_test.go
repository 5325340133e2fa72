package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const k8sDir = "../../deploy/kubernetes"

// decodeStrict decodes one Kubernetes object into its k8s.io/api type,
// refusing unknown fields, and returns it.
func decodeStrict(t *testing.T, name string, doc []byte) any {
	t.Helper()
	var head struct{ APIVersion, Kind string }
	if err := yaml.Unmarshal(doc, &head); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var obj any
	switch head.APIVersion + " " + head.Kind {
	case "batch/v1 Job":
		obj = &batchv1.Job{}
	case "v1 PersistentVolumeClaim":
		obj = &corev1.PersistentVolumeClaim{}
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
	default:
		t.Fatalf("%s: unexpected object %s %s", name, head.APIVersion, head.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatalf("%s: %s %s does not decode strictly: %v", name, head.APIVersion, head.Kind, err)
	}
	return obj
}

func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(d) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", path, line)
		}
		env[k] = v
	}
	return env
}

// The manifests decode strictly into k8s.io/api types, agree with each other
// (shard count, the variables the Job expands) and with tracekit replay's
// flags, and kubectl kustomize renders them.
func TestKubernetesManifests(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	if len(files) < 3 {
		t.Fatalf("expected the manifests in %s, found %v", k8sDir, files)
	}
	var job *batchv1.Job
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range splitDocs(b) {
			if j, ok := decodeStrict(t, f, d).(*batchv1.Job); ok {
				job = j
			}
		}
	}
	if job == nil {
		t.Fatal("no Job among the manifests")
	}
	env := readEnvFile(t, filepath.Join(k8sDir, "flags.env"))
	checkJob(t, job, env)

	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not installed: the rendered manifests were not checked")
	}
	out, err := exec.Command("kubectl", "kustomize", k8sDir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", k8sDir, err, out)
	}
	var rendered *batchv1.Job
	var cm *corev1.ConfigMap
	for _, d := range splitDocs(out) {
		switch o := decodeStrict(t, "rendered", d).(type) {
		case *batchv1.Job:
			rendered = o
		case *corev1.ConfigMap:
			cm = o
		}
	}
	if rendered == nil || cm == nil {
		t.Fatalf("kubectl kustomize rendered no Job or no ConfigMap:\n%s", out)
	}
	if ref := rendered.Spec.Template.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name; ref != cm.Name {
		t.Errorf("the rendered Job reads ConfigMap %q, the rendered ConfigMap is %q", ref, cm.Name)
	}
	checkJob(t, rendered, cm.Data)
}

func checkJob(t *testing.T, job *batchv1.Job, env map[string]string) {
	t.Helper()
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("the Job must be Indexed (JOB_COMPLETION_INDEX gives each pod its shard)")
	}
	n, err := strconv.Atoi(env["SHARDS"])
	if err != nil || s.Completions == nil || s.Parallelism == nil || int(*s.Completions) != n || int(*s.Parallelism) != n {
		t.Errorf("completions, parallelism and SHARDS must be equal: %v, %v, %q", s.Completions, s.Parallelism, env["SHARDS"])
	}
	c := s.Template.Spec.Containers[0]
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("the replay container needs a CPU request and a memory limit")
	}
	// Every $(VAR) the arguments expand is defined in the ConfigMap.
	for _, a := range c.Args {
		for _, m := range regexp.MustCompile(`\$\(([A-Z_]+)\)`).FindAllStringSubmatch(a, -1) {
			if _, ok := env[m[1]]; !ok {
				t.Errorf("argument %q expands $(%s), which flags.env does not define", a, m[1])
			}
		}
	}
	// The arguments are a valid tracekit replay command line.
	if len(c.Args) == 0 || c.Args[0] != "replay" {
		t.Fatalf("the container's arguments must start with replay: %v", c.Args)
	}
	cmd := newReplayCmd()
	args := make([]string, len(c.Args)-1)
	for i, a := range c.Args[1:] {
		args[i] = regexp.MustCompile(`\$\(([A-Z_]+)\)`).ReplaceAllStringFunc(a, func(v string) string { return env[v[2:len(v)-1]] })
	}
	if err := cmd.ParseFlags(args); err != nil {
		t.Errorf("the Job's replay arguments do not parse: %v (%v)", err, args)
	}
	if rest := cmd.Flags().Args(); len(rest) != 1 {
		t.Errorf("the Job's replay arguments leave %d positional arguments, want the trace alone: %v", len(rest), rest)
	}
}

// The strict decoding the manifest test relies on does refuse a misspelt field.
func TestStrictDecodeRefusesUnknownFields(t *testing.T) {
	doc := []byte("apiVersion: batch/v1\nkind: Job\nspec:\n  completionz: 3\n")
	if err := yaml.UnmarshalStrict(doc, &batchv1.Job{}); err == nil || !strings.Contains(err.Error(), "completionz") {
		t.Fatalf("a misspelt field decoded: %v", err)
	}
}
