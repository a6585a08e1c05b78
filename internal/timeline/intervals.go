package timeline

// intervals is a list of time intervals in order, with at most max entries:
// past that, the closest neighbours are joined (merged is then true), so a
// condition that flaps every second for a week costs bounded memory and
// still shows where it was on.
type intervals struct {
	list   []Interval
	open   bool // the last interval is still growing
	max    int
	merged bool
}

// extend records "on at x": it grows the open interval, or opens one at x
// (after a gap, or when none is open). prevX is the previous sample's X.
func (iv *intervals) extend(x, prevX float64, gap bool) {
	if iv.open && !gap {
		iv.list[len(iv.list)-1].To = x
		return
	}
	if iv.open && gap {
		iv.list[len(iv.list)-1].To = prevX
	}
	iv.add(Interval{From: x, To: x})
	iv.open = true
}

// close records "off at x": the open interval held until this sample, or
// until the last one before a gap.
func (iv *intervals) close(x, prevX float64, gap bool) {
	if !iv.open {
		return
	}
	iv.open = false
	if gap {
		iv.list[len(iv.list)-1].To = prevX
		return
	}
	iv.list[len(iv.list)-1].To = x
}

// clipLast ends the last interval at x when it would run past it.
func (iv *intervals) clipLast(x float64) {
	if n := len(iv.list); n > 0 && iv.list[n-1].To > x {
		iv.list[n-1].To = max(x, iv.list[n-1].From)
	}
}

func (iv *intervals) add(i Interval) {
	if n := len(iv.list); n > 0 && i.From <= iv.list[n-1].To {
		// Overlapping the previous one (a restarted grace period whose
		// first window was drawn in full): keep them apart in time order.
		iv.list[n-1].To = max(iv.list[n-1].From, i.From)
	}
	iv.list = append(iv.list, i)
	if iv.max > 0 && len(iv.list) > iv.max {
		iv.halve()
	}
}

// halve joins each interval with its successor, halving the list: what was
// on stays drawn on, with the short gaps between neighbours filled.
func (iv *intervals) halve() {
	iv.merged = true
	out := iv.list[:0]
	for i := 0; i < len(iv.list); i += 2 {
		j := iv.list[i]
		if i+1 < len(iv.list) {
			j.To = iv.list[i+1].To
		}
		out = append(out, j)
	}
	iv.list = out
}
