// Package cdxj makes CDXJ indexes of WARC files in the format pywb reads
// (that of webrecorder's cdxj-indexer, whose lines it writes byte for
// byte): one line per response, revisit or resource record in the replay
// index, and one per metadata record in a side index beside it (Kind,
// MetaPath),
//
//	SURT-key 14-digit-timestamp {"url": …, "mime": …, "status": …, "digest": …, "length": …, "offset": …, "filename": …}
//
// sorted by their bytes. SURT makes the keys, Line formats and Parse reads a
// line, Index indexes any WARC stream (read with gowarc), IndexFile and
// WriteSorted write a sorted index file atomically.
package cdxj
