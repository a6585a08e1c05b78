package report

import (
	"html/template"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/policy"
)

// The log writes quantities as resource.Quantity does, exactly and often
// in Ki (200984Ki); the table shows them for people (196Mi) with the
// log's text as the cell's title.

// isCount reports whether a signal's quantities are counts (inodes, PIDs)
// rather than bytes; a local-storage limit (ephemeralpodfs.limit, ...) is
// bytes.
func isCount(sig string) bool {
	r, ok := policy.ResourceFor(policy.Signal(sig))
	return ok && (r == policy.ResourceInodes || r == policy.ResourcePIDs)
}

// binaryUnits are the units bytes are shown in, largest first.
var binaryUnits = []struct {
	size   float64
	suffix string
}{{1 << 50, "Pi"}, {1 << 40, "Ti"}, {1 << 30, "Gi"}, {1 << 20, "Mi"}, {1 << 10, "Ki"}}

// HumanQuantity writes a quantity from the log for people: bytes in the
// largest binary unit they have one of, to digits significant digits
// (196Mi for 200984Ki, 1.53Gi); counts as the whole number they are. ok is
// false for text that is not a quantity, returned as it is.
func HumanQuantity(sig, q string, digits int) (string, bool) {
	v, err := resource.ParseQuantity(q)
	if err != nil {
		return q, false
	}
	if isCount(sig) {
		return strconv.FormatInt(v.Value(), 10), true
	}
	b := v.Value()
	x := float64(b)
	for _, u := range binaryUnits {
		if math.Abs(x) >= u.size {
			return significant(x/u.size, digits) + u.suffix, true
		}
	}
	return strconv.FormatInt(b, 10), true
}

// significant writes x with digits significant digits (at least its whole
// part), without trailing zeros.
func significant(x float64, digits int) string {
	whole := 1
	if a := math.Abs(x); a >= 1 {
		whole = int(math.Floor(math.Log10(a))) + 1
	}
	s := strconv.FormatFloat(x, 'f', max(digits-whole, 0), 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// quantityHTML is q for people, with the log's text as its title when the
// two differ.
func quantityHTML(sig, q string, digits int) template.HTML {
	h, ok := HumanQuantity(sig, q, digits)
	if !ok || h == q {
		return template.HTML(template.HTMLEscapeString(q))
	}
	return template.HTML(`<span title="` + template.HTMLEscapeString(q) + `">` + template.HTMLEscapeString(h) + `</span>`)
}

// comparedHTML shows an observed value and the threshold's quantity it was
// below, with as many digits as it takes for two different values not to
// read the same (255.9Mi < 256Mi, never 256Mi < 256Mi).
func comparedHTML(sig, avail, qty string) (template.HTML, template.HTML) {
	digits := 3
	a, errA := resource.ParseQuantity(avail)
	q, errQ := resource.ParseQuantity(qty)
	if errA == nil && errQ == nil && a.Cmp(q) != 0 {
		for ; digits < 19; digits++ {
			ha, _ := HumanQuantity(sig, avail, digits)
			hq, _ := HumanQuantity(sig, qty, digits)
			if ha != hq {
				break
			}
		}
	}
	return quantityHTML(sig, avail, digits), quantityHTML(sig, qty, digits)
}

// wordBreaks escapes s and lets a line break after each '/' and '.', so
// that a table cell wraps "allocatableMemory.available" or a pod's
// namespace/name where a reader would, never in the middle of a word.
func wordBreaks(s string) template.HTML {
	var b strings.Builder
	for {
		i := strings.IndexAny(s, "/.")
		if i < 0 {
			b.WriteString(template.HTMLEscapeString(s))
			return template.HTML(b.String())
		}
		b.WriteString(template.HTMLEscapeString(s[:i+1]))
		b.WriteString("<wbr>")
		s = s[i+1:]
	}
}

// longPod is the length of namespace/name past which a pod's name may
// wrap, after the namespace; a shorter one never wraps (a break inside a
// name reads as two names).
const longPod = 40

// podHTML escapes a pod's namespace/name for a table cell.
func podHTML(pod string) template.HTML {
	if len(pod) > longPod {
		ns, name, ok := strings.Cut(pod, "/")
		if ok {
			return template.HTML(template.HTMLEscapeString(ns) + "/<wbr>" + template.HTMLEscapeString(name))
		}
		return template.HTML(template.HTMLEscapeString(pod))
	}
	return template.HTML(`<span class="pod">` + template.HTMLEscapeString(pod) + `</span>`)
}
