package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
)

// HugePages is one huge page size's persistent pool, as cAdvisor's machine
// info reads it (utils/sysinfo GetHugePagesInfo, which the kubelet turns into
// the node's hugepages-<size> capacity): the size from the directory name
// hugepages-<size>kB, the number of pages from its nr_hugepages.
type HugePages struct {
	PageSizeBytes uint64
	Pages         uint64
}

// Bytes is the pool's size.
func (h HugePages) Bytes() uint64 { return h.PageSizeBytes * h.Pages }

// hugePagesDir is where the kernel lists its huge page sizes, under /sys.
const hugePagesDir = "/kernel/mm/hugepages"

// ReadHugePages reads <sysRoot>/kernel/mm/hugepages/hugepages-<size>kB/nr_hugepages
// for every size, sorted by page size. A kernel without huge page support
// (no such directory) has none: nil, no error.
func ReadHugePages(sysRoot string) ([]HugePages, error) {
	dir := sysRoot + hugePagesDir
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []HugePages
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "hugepages-") {
			continue
		}
		size, err := parseHugePagesDirName(e.Name())
		if err != nil {
			return nil, &ParseError{Path: dir + "/" + e.Name(), Line: 1, Token: e.Name(), Err: err}
		}
		n, err := readFile(dir+"/"+e.Name()+"/nr_hugepages", "", parseSingleUint)
		if err != nil {
			return nil, err
		}
		out = append(out, HugePages{PageSizeBytes: size, Pages: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PageSizeBytes < out[j].PageSizeBytes })
	return out, nil
}

// parseHugePagesDirName turns "hugepages-2048kB" into 2 MiB in bytes.
func parseHugePagesDirName(name string) (uint64, error) {
	s, ok := strings.CutPrefix(name, "hugepages-")
	if !ok {
		return 0, errFormat
	}
	s, ok = strings.CutSuffix(s, "kB")
	if !ok {
		return 0, errFormat
	}
	kb, err := strconv.ParseUint(s, 10, 64)
	if err != nil || kb == 0 || kb > (^uint64(0))>>10 {
		return 0, errNotNumber
	}
	return kb << 10, nil
}

// HugePagesBytes is the memory reserved for huge pages of every size: the
// sum of the node's hugepages-<size> capacities.
func HugePagesBytes(sysRoot string) (uint64, error) {
	hs, err := ReadHugePages(sysRoot)
	if err != nil {
		return 0, err
	}
	var total uint64
	for _, h := range hs {
		b := h.Bytes()
		if h.Pages != 0 && b/h.Pages != h.PageSizeBytes {
			return 0, fmt.Errorf("%s%s: %d pages of %d bytes overflow", sysRoot, hugePagesDir, h.Pages, h.PageSizeBytes)
		}
		total += b
	}
	return total, nil
}
