package fleet

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// tableReport has a row for each way a row is written: met with a trend
// and a pod evicted now, falling with a crossing, a node that could not be
// read, and a name that needs escaping.
func tableReport() *Report {
	return &Report{Profile: "kubelet", Window: "20s", Nodes: []Row{
		{Node: "node-a", Ready: "True", Conditions: []string{"MemoryPressure"}, Source: "api server proxy",
			Nearest: &Nearest{Threshold: "memory.available<500Mi", Signal: "memory.available", Margin: "-20Mi", MarginPercent: -0.5, Met: true},
			Trend:   &Trend{PerSecond: -3 << 20}, Met: []string{"memory.available<500Mi"},
			First: &Victim{Pod: "default/hog", Signal: "memory.available", Now: true, Why: "exceeds its request by 1Gi"}, Agent: "evictd-x1"},
		{Node: "node-b", Ready: "True", Source: "kubelet https://127.0.0.1:10250 (address not allowed)",
			Nearest: &Nearest{Threshold: "nodefs.inodesFree<5%", Signal: "nodefs.inodesFree", Margin: "1000", MarginPercent: 12.25},
			Trend:   &Trend{PerSecond: -2.5, CrossesIn: "6m40s"},
			First:   &Victim{Pod: "kube-system/big", Signal: "nodefs.inodesFree", Why: "most inodes"}, Agent: "none", Notes: []string{"one sample failed"}},
		{Node: "node-\x1b[31mc", Ready: "Unknown", Agent: "-", Error: "configz: forbidden"},
	}}
}

// testdata/table.golden is the table explain --cluster wrote before it moved
// here from cmd/evictd: the old function's output for tableReport, with a
// window and with one sample.
func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	tableReport().WriteTable(&b)
	r := tableReport()
	r.Window = "0s"
	r.WriteTable(&b)
	want, err := os.ReadFile("testdata/table.golden")
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("the table differs from testdata/table.golden:\n%s\nwant:\n%s", b.String(), want)
	}
}

// -o json is the report itself, '<' unescaped.
func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := tableReport().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || len(back.Nodes) != 3 || back.Nodes[1].Trend.CrossesIn != "6m40s" {
		t.Fatalf("%v %+v", err, back)
	}
	if !strings.Contains(b.String(), `"threshold": "memory.available<500Mi"`) {
		t.Errorf("'<' escaped or not indented: %s", b.String())
	}
}
