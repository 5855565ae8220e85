package links

// maxRefreshDelay caps the delay ParseRefresh reports (seconds; about 68
// years), so that a long run of digits cannot overflow it.
const maxRefreshDelay = 1<<31 - 1

// ParseRefresh parses the content of a <meta http-equiv=refresh> or the
// value of a Refresh header by the HTML standard's shared declarative
// refresh steps: "5", "0;url=/next", "0; URL='/next'", "3, /next" and the
// like. It returns the delay in seconds (capped at about 68 years) and the
// URL as written, unresolved and untrimmed at its end; an empty url means
// the page itself (no URL, or "url="). ok is false when the steps fail:
// no delay (neither a digit nor a '.' first, after white space), or
// something other than ';', ',' or white space after it. url is a
// subslice of v. It never panics, and its work is linear in len(v).
func ParseRefresh(v []byte) (delay int, url []byte, ok bool) {
	i := 0
	skip := func() {
		for i < len(v) && isSpace(v[i]) {
			i++
		}
	}
	skip()
	start := i
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		if delay <= maxRefreshDelay/10 {
			delay = min(delay*10+int(v[i]-'0'), maxRefreshDelay)
		} else {
			delay = maxRefreshDelay
		}
		i++
	}
	if i == start && (i >= len(v) || v[i] != '.') {
		return 0, nil, false
	}
	for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
		i++ // a fraction: ignored
	}
	if i < len(v) {
		if c := v[i]; c != ';' && c != ',' && !isSpace(c) {
			return 0, nil, false
		}
		skip()
		if i < len(v) && (v[i] == ';' || v[i] == ',') {
			i++
		}
		skip()
	}
	if i >= len(v) {
		return delay, nil, true
	}
	if (v[i] | 0x20) == 'u' {
		j, ok := afterURLEquals(v, i)
		if !ok {
			return delay, v[i:], true // not "url =": all the rest is the URL
		}
		if j >= len(v) {
			return delay, nil, true
		}
		i = j
	}
	if q := v[i]; q == '\'' || q == '"' {
		i++
		u := v[i:]
		for k, c := range u {
			if c == q {
				return delay, u[:k], true
			}
		}
		return delay, u, true
	}
	return delay, v[i:], true
}

// afterURLEquals returns the index after "url", white space, '=' and white
// space at v[i:] (case-insensitive); ok is false if v[i:] does not start so.
func afterURLEquals(v []byte, i int) (int, bool) {
	if i+3 > len(v) || (v[i]|0x20) != 'u' || (v[i+1]|0x20) != 'r' || (v[i+2]|0x20) != 'l' {
		return 0, false
	}
	i += 3
	for i < len(v) && isSpace(v[i]) {
		i++
	}
	if i >= len(v) || v[i] != '=' {
		return 0, false
	}
	i++
	for i < len(v) && isSpace(v[i]) {
		i++
	}
	return i, true
}
