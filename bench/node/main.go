// Command node prints the real-node benchmark's tables (bench/node.sh) from
// the rows test/node's BenchmarkNode appended to a JSON-lines file.
// Usage: node ROWS.jsonl
package main

import (
	"fmt"
	"os"

	"github.com/evictd/evictd/test/node/nodebench"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: node ROWS.jsonl")
		os.Exit(2)
	}
	rows, err := nodebench.Read(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "node: %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	nodebench.Print(os.Stdout, rows)
}
