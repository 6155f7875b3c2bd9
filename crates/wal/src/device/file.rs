//! [`FileDevice`]: a real directory of WAL segment files, managed as pg_wal is: segments
//! created by `XLogFileInit`, recycled by `InstallXLogFileSegment` and removed by
//! `RemoveXlogFile` (xlog.c), named by `XLogFileName` (xlog_internal.h), written with
//! `pg_pwrite` and made durable with `fdatasync` (`issue_xlog_fsync`).

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::{DeviceError, FlushDevice};

/// `XLOG_BLCKSZ` as a length.
const XLOG_BLCKSZ: usize = crate::pos::XLOG_BLCKSZ as usize;

/// The largest segment size accepted (PostgreSQL's `WalSegMaxSize`, 1 GB).
pub const MAX_WAL_SEGMENT_SIZE: u64 = 1024 * 1024 * 1024;

/// The number of old segment files a [`FileDevice`] keeps before it recycles
/// the oldest one.
pub const DEFAULT_KEEP_SEGMENTS: usize = 4;

/// The timeline written into segment file names; fixed, as there are no
/// timeline switches here.
pub const TIMELINE_ID: u32 = 1;

/// Zeros are written in chunks of this many `XLOG_BLCKSZ` pages when a
/// segment is created (as `pg_pwrite_zeros` writes a vector of zeroed blocks).
const ZERO_FILL_PAGES: usize = 16;

/// An open segment file.
#[derive(Debug)]
struct Segment {
    segno: u64,
    path: PathBuf,
    file: File,
    /// Written since its last fdatasync.
    dirty: bool,
}

/// A real directory of WAL segment files, managed as pg_wal is.
///
/// Segment `n` holds WAL positions `n * segment_size .. (n + 1) *
/// segment_size` and is named by [`segment_file_name`](Self::segment_file_name)
/// (`XLogFileName`). A write to a new segment opens it (`XLogFileInit`): an
/// existing file of that name is used as it is; otherwise, if more than
/// `keep_segments` old segment files are left behind the current one, the
/// oldest is renamed to the new name (recycled, `InstallXLogFileSegment`);
/// otherwise a new file is created under the name `xlogtemp.PID`, zero-filled
/// to the full segment size, fsynced and renamed into place. Each rename is
/// followed by an fsync of the directory (`durable_rename`). An old segment
/// with writes not yet flushed is never recycled; surplus clean old files are
/// removed (`RemoveXlogFile`).
///
/// Writes use `pwrite` at the offset in the segment; [`flush`](FlushDevice::flush)
/// fdatasyncs every earlier segment written since the last flush, then the
/// current one (`issue_xlog_fsync` with `wal_sync_method = fdatasync`), and
/// does nothing when nothing was written since.
///
/// Segments are created or opened when the first write reaches them. After a
/// failed write or flush every call returns
/// [`DeviceError::Failed`]. A directory must be used by one device at a time
/// (the temporary name is per process, as in PostgreSQL).
#[derive(Debug)]
pub struct FileDevice {
    dir: PathBuf,
    segment_size: u64,
    keep_segments: usize,
    current: Option<Segment>,
    /// Earlier segments written since the last flush, kept open to be synced.
    unsynced: Vec<Segment>,
    /// Closed old segment files in the directory, oldest first.
    old: VecDeque<u64>,
    created: u64,
    recycled: u64,
    removed: u64,
    failed: Option<String>,
    /// Declared last so the files above are closed before it is removed.
    _temp: Option<tempfile::TempDir>,
}

impl FileDevice {
    /// Opens `dir` (created if missing) as a WAL directory of segments of
    /// `segment_size` bytes. Segments are created (or opened) as writes reach them, so the
    /// directory holds only segments with WAL in them (pg_waldump reads the segment size from
    /// the first file it finds).
    ///
    /// `segment_size` must be a power of two between `XLOG_BLCKSZ` and
    /// [`MAX_WAL_SEGMENT_SIZE`]; small sizes such as 64 kB keep tests quick.
    pub fn create(dir: &Path, segment_size: u64) -> Result<Self, DeviceError> {
        check_segment_size(segment_size)?;
        fs::create_dir_all(dir).map_err(|source| DeviceError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        Self::create_in(dir.to_path_buf(), segment_size, None)
    }

    /// Like [`create`](Self::create) in a new temporary directory that the
    /// device owns and removes when it is dropped.
    pub fn temp(segment_size: u64) -> Result<Self, DeviceError> {
        check_segment_size(segment_size)?;
        let temp = tempfile::Builder::new()
            .prefix("pg_wal.")
            .tempdir()
            .map_err(|source| DeviceError::CreateDir {
                path: std::env::temp_dir(),
                source,
            })?;
        Self::create_in(temp.path().to_path_buf(), segment_size, Some(temp))
    }

    fn create_in(
        dir: PathBuf,
        segment_size: u64,
        temp: Option<tempfile::TempDir>,
    ) -> Result<Self, DeviceError> {
        let device = FileDevice {
            dir,
            segment_size,
            keep_segments: DEFAULT_KEEP_SEGMENTS,
            current: None,
            unsynced: Vec::new(),
            old: VecDeque::new(),
            created: 0,
            recycled: 0,
            removed: 0,
            failed: None,
            _temp: temp,
        };
        Ok(device)
    }

    /// Sets how many old segment files are kept before the oldest is recycled
    /// (default [`DEFAULT_KEEP_SEGMENTS`]).
    pub fn with_keep_segments(mut self, keep_segments: usize) -> Self {
        self.keep_segments = keep_segments;
        self
    }

    /// The WAL directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The segment size in bytes.
    pub fn segment_size(&self) -> u64 {
        self.segment_size
    }

    /// How many old segment files are kept before recycling.
    pub fn keep_segments(&self) -> usize {
        self.keep_segments
    }

    /// How many segment files were created and zero-filled.
    pub fn segments_created(&self) -> u64 {
        self.created
    }

    /// How many segment files were recycled (an old one renamed to a new
    /// segment's name).
    pub fn segments_recycled(&self) -> u64 {
        self.recycled
    }

    /// How many surplus old segment files were removed.
    pub fn segments_removed(&self) -> u64 {
        self.removed
    }

    /// The file name of segment `segno` on timeline 1 (models `XLogFileName`
    /// in xlog_internal.h): timeline, then `segno / segs_per_xlogid` and
    /// `segno % segs_per_xlogid`, each as 8 hex digits, where
    /// `segs_per_xlogid = 0x1_0000_0000 / segment_size`.
    ///
    /// # Panics
    ///
    /// If `segment_size` is 0 or larger than 4 GB.
    pub fn segment_file_name(segno: u64, segment_size: u64) -> String {
        assert!(
            segment_size > 0 && segment_size <= 0x1_0000_0000,
            "invalid WAL segment size {segment_size}"
        );
        let segs_per_xlogid = 0x1_0000_0000 / segment_size;
        format!(
            "{:08X}{:08X}{:08X}",
            TIMELINE_ID,
            (segno / segs_per_xlogid) as u32,
            (segno % segs_per_xlogid) as u32
        )
    }

    fn segment_path(&self, segno: u64) -> PathBuf {
        self.dir
            .join(Self::segment_file_name(segno, self.segment_size))
    }

    fn check_usable(&self) -> Result<(), DeviceError> {
        match &self.failed {
            Some(msg) => Err(DeviceError::Failed(msg.clone())),
            None => Ok(()),
        }
    }

    /// Records a write or flush failure: the device is unusable from now on.
    fn fail(&mut self, err: DeviceError) -> DeviceError {
        self.failed = Some(err.to_string());
        err
    }

    /// Makes `segno` the current segment (the segment switch in `XLogWrite`:
    /// `XLogFileClose`, then `XLogFileInit`).
    fn open_segment(&mut self, segno: u64) -> Result<(), DeviceError> {
        if let Some(cur) = self.current.take() {
            let at = self.old.partition_point(|&s| s < cur.segno);
            if self.old.get(at) != Some(&cur.segno) {
                self.old.insert(at, cur.segno);
            }
            if cur.dirty {
                self.unsynced.push(cur); // stays open until the next flush
            }
        }
        if let Some(at) = self.old.iter().position(|&s| s == segno) {
            self.old.remove(at);
        }
        let path = self.segment_path(segno);

        // XLogFileInit: use an existing file if there is one.
        let file = match open_rw(&path) {
            Ok(file) => file,
            Err(source) if source.kind() == io::ErrorKind::NotFound => {
                let oldest_clean = self
                    .old
                    .front()
                    .copied()
                    .filter(|&s| !self.unsynced.iter().any(|u| u.segno == s));
                match oldest_clean {
                    Some(oldest) if self.old.len() > self.keep_segments => {
                        self.recycle(oldest, &path)?;
                    }
                    _ => self.init_segment(&path)?,
                }
                self.remove_surplus()?;
                open_rw(&path).map_err(|source| DeviceError::Open {
                    path: path.clone(),
                    source,
                })?
            }
            Err(source) => return Err(DeviceError::Open { path, source }),
        };
        self.current = Some(Segment {
            segno,
            path,
            file,
            dirty: false,
        });
        Ok(())
    }

    /// Renames old segment `oldest` to `path` (models the recycling branch of
    /// `RemoveXlogFile` through `InstallXLogFileSegment` / `durable_rename`).
    fn recycle(&mut self, oldest: u64, path: &Path) -> Result<(), DeviceError> {
        let from = self.segment_path(oldest);
        fs::rename(&from, path).map_err(|source| DeviceError::Rename {
            from,
            to: path.to_path_buf(),
            source,
        })?;
        self.old.pop_front();
        fsync_dir(&self.dir)?;
        self.recycled += 1;
        Ok(())
    }

    /// Creates a zero-filled segment at `path` (models `XLogFileInitInternal`
    /// with `wal_init_zero = on`: fill `xlogtemp.PID`, fsync, rename into
    /// place, fsync the directory).
    fn init_segment(&mut self, path: &Path) -> Result<(), DeviceError> {
        let tmp = self.dir.join(format!("xlogtemp.{}", std::process::id()));
        let _ = fs::remove_file(&tmp);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|source| DeviceError::Create {
                path: tmp.clone(),
                source,
            })?;
        let chunk = (XLOG_BLCKSZ * ZERO_FILL_PAGES).min(self.segment_size as usize);
        let zeros = vec![0u8; chunk];
        let mut offset = 0u64;
        while offset < self.segment_size {
            let len = chunk.min((self.segment_size - offset) as usize);
            if let Err(source) = file.write_all_at(&zeros[..len], offset) {
                drop(file);
                let _ = fs::remove_file(&tmp);
                return Err(DeviceError::InitWrite { path: tmp, source });
            }
            offset += len as u64;
        }
        if let Err(source) = file.sync_all() {
            drop(file);
            let _ = fs::remove_file(&tmp);
            return Err(DeviceError::Fsync { path: tmp, source });
        }
        drop(file);
        if let Err(source) = fs::rename(&tmp, path) {
            let _ = fs::remove_file(&tmp);
            return Err(DeviceError::Rename {
                from: tmp,
                to: path.to_path_buf(),
                source,
            });
        }
        fsync_dir(&self.dir)?;
        self.created += 1;
        Ok(())
    }

    /// Removes the oldest clean old segments beyond `keep_segments` (models
    /// the removal branch of `RemoveXlogFile`, `durable_unlink`).
    fn remove_surplus(&mut self) -> Result<(), DeviceError> {
        let mut removed_any = false;
        while self.old.len() > self.keep_segments {
            let Some(at) = self
                .old
                .iter()
                .position(|&s| !self.unsynced.iter().any(|u| u.segno == s))
            else {
                break;
            };
            let path = self.segment_path(self.old[at]);
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(source) if source.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(DeviceError::Remove { path, source }),
            }
            self.old.remove(at);
            self.removed += 1;
            removed_any = true;
        }
        if removed_any {
            fsync_dir(&self.dir)?;
        }
        Ok(())
    }

    fn write_inner(&mut self, lsn: u64, data: &[u8]) -> Result<(), DeviceError> {
        let segno = lsn / self.segment_size;
        let offset = lsn % self.segment_size;
        if offset + data.len() as u64 > self.segment_size {
            return Err(DeviceError::CrossesSegment {
                lsn,
                len: data.len(),
                segment_size: self.segment_size,
            });
        }
        if self.current.as_ref().map(|s| s.segno) != Some(segno) {
            self.open_segment(segno)?;
        }
        let Some(seg) = self.current.as_mut() else {
            unreachable!("open_segment leaves a current segment");
        };
        seg.file
            .write_all_at(data, offset)
            .map_err(|source| DeviceError::Write {
                path: seg.path.clone(),
                offset,
                len: data.len(),
                source,
            })?;
        seg.dirty = true;
        Ok(())
    }

    fn flush_inner(&mut self) -> Result<(), DeviceError> {
        while let Some(seg) = self.unsynced.last() {
            seg.file
                .sync_data()
                .map_err(|source| DeviceError::Fdatasync {
                    path: seg.path.clone(),
                    source,
                })?;
            self.unsynced.pop();
        }
        if let Some(seg) = self.current.as_mut() {
            if seg.dirty {
                seg.file
                    .sync_data()
                    .map_err(|source| DeviceError::Fdatasync {
                        path: seg.path.clone(),
                        source,
                    })?;
                seg.dirty = false;
            }
        }
        Ok(())
    }
}

impl FlushDevice for FileDevice {
    fn name(&self) -> &'static str {
        "file"
    }

    fn wants_bytes(&self) -> bool {
        true
    }

    /// `pg_pwrite` of `data` into its segment, switching segments first when
    /// `lsn` is in another one.
    fn write(&mut self, lsn: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.check_usable()?;
        if data.is_empty() {
            return Ok(());
        }
        match self.write_inner(lsn, data) {
            Ok(()) => Ok(()),
            Err(err @ DeviceError::CrossesSegment { .. }) => Err(err),
            Err(err) => Err(self.fail(err)),
        }
    }

    /// fdatasync of every segment written since the last flush (models
    /// `issue_xlog_fsync`); `upto` is not used.
    fn flush(&mut self, _upto: u64) -> Result<(), DeviceError> {
        self.check_usable()?;
        self.flush_inner().map_err(|err| self.fail(err))
    }
}

/// `pg_wal/` and the name of the segment holding WAL position `lsn`, as
/// PostgreSQL's error messages show it (for devices without a directory of
/// their own). `segment_size` must have passed [`check_segment_size`].
pub(crate) fn wal_segment_path(lsn: u64, segment_size: u64) -> PathBuf {
    Path::new("pg_wal").join(FileDevice::segment_file_name(
        lsn / segment_size,
        segment_size,
    ))
}

/// Checks a segment size as `IsValidWalSegSize` does, but allowing sizes down
/// to one page.
pub(crate) fn check_segment_size(segment_size: u64) -> Result<(), DeviceError> {
    if segment_size.is_power_of_two()
        && segment_size >= XLOG_BLCKSZ as u64
        && segment_size <= MAX_WAL_SEGMENT_SIZE
    {
        Ok(())
    } else {
        Err(DeviceError::InvalidSegmentSize(segment_size))
    }
}

/// Opens an existing segment for writing (models `XLogFileOpen`).
fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

/// fsyncs a directory so a rename or removal in it is durable.
fn fsync_dir(dir: &Path) -> Result<(), DeviceError> {
    let handle = File::open(dir).map_err(|source| DeviceError::Open {
        path: dir.to_path_buf(),
        source,
    })?;
    handle.sync_all().map_err(|source| DeviceError::Fsync {
        path: dir.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pos::DEFAULT_WAL_SEGMENT_SIZE;
    use std::os::unix::fs::MetadataExt;

    /// A segment size small enough for tests.
    const SEG: u64 = 64 * 1024;

    fn segment_files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
            .collect()
    }

    #[test]
    fn segment_file_names_follow_xlogfilename() {
        let n = FileDevice::segment_file_name;
        assert_eq!(n(0, DEFAULT_WAL_SEGMENT_SIZE), "000000010000000000000000");
        assert_eq!(n(1, DEFAULT_WAL_SEGMENT_SIZE), "000000010000000000000001");
        assert_eq!(n(255, DEFAULT_WAL_SEGMENT_SIZE), "0000000100000000000000FF");
        assert_eq!(n(256, DEFAULT_WAL_SEGMENT_SIZE), "000000010000000100000000");
        assert_eq!(
            n(0x1234 * 256 + 0xAB, DEFAULT_WAL_SEGMENT_SIZE),
            "0000000100001234000000AB"
        );
        // 1 GB segments: 4 per xlogid.
        assert_eq!(n(5, MAX_WAL_SEGMENT_SIZE), "000000010000000100000001");
        // 64 kB segments: 65536 per xlogid.
        assert_eq!(n(256, SEG), "000000010000000000000100");
        assert_eq!(n(65536, SEG), "000000010000000100000000");
    }

    #[test]
    fn segment_size_must_be_a_power_of_two_of_at_least_a_page() {
        for bad in [0, 1, 4096, 3 * 8192, 100_000, 2 * MAX_WAL_SEGMENT_SIZE] {
            match FileDevice::temp(bad) {
                Err(DeviceError::InvalidSegmentSize(s)) => assert_eq!(s, bad),
                other => panic!("segment size {bad} should be rejected, got {other:?}"),
            }
        }
        let dev = FileDevice::temp(XLOG_BLCKSZ as u64).unwrap();
        assert_eq!(dev.segment_size(), XLOG_BLCKSZ as u64);
    }

    #[test]
    fn file_device_writes_bytes_into_their_segments() {
        let mut dev = FileDevice::temp(SEG).unwrap();
        assert_eq!(dev.name(), "file");
        assert!(dev.wants_bytes());
        assert_eq!(
            dev.segments_created(),
            0,
            "segments appear as WAL reaches them"
        );
        let dir = dev.dir().to_path_buf();
        let seg0 = dir.join("000000010000000000000000");
        let seg1 = dir.join("000000010000000000000001");
        assert!(!seg0.exists());

        // Segment 0: two whole pages, then a partial page, then a rewrite of
        // that partial page starting mid-page (as XLogWrite rewrites the
        // last, partially filled page).
        let pages = pattern(2 * XLOG_BLCKSZ, 1);
        dev.write(0, &pages).unwrap();
        let partial = pattern(1000, 2);
        dev.write(2 * XLOG_BLCKSZ as u64, &partial[..1000]).unwrap();
        let rest = pattern(2000, 3);
        dev.write(2 * XLOG_BLCKSZ as u64 + 1000, &rest).unwrap();
        // The last page of segment 0.
        let last = pattern(XLOG_BLCKSZ, 4);
        dev.write(SEG - XLOG_BLCKSZ as u64, &last).unwrap();
        dev.flush(SEG).unwrap();

        // Segment 1, at an offset inside it.
        let in_seg1 = pattern(XLOG_BLCKSZ + 8, 5);
        dev.write(SEG + 8192, &in_seg1).unwrap();
        assert!(
            dev.unsynced.is_empty(),
            "segment 0 was flushed before the switch"
        );
        dev.flush(SEG + 8192 + in_seg1.len() as u64).unwrap();
        assert_eq!(dev.segments_created(), 2);
        assert_eq!(dev.segments_recycled(), 0);

        let bytes0 = fs::read(&seg0).unwrap();
        assert_eq!(bytes0.len() as u64, SEG);
        let mut expect0 = vec![0u8; SEG as usize];
        expect0[..2 * XLOG_BLCKSZ].copy_from_slice(&pages);
        expect0[2 * XLOG_BLCKSZ..2 * XLOG_BLCKSZ + 1000].copy_from_slice(&partial);
        expect0[2 * XLOG_BLCKSZ + 1000..2 * XLOG_BLCKSZ + 3000].copy_from_slice(&rest);
        expect0[SEG as usize - XLOG_BLCKSZ..].copy_from_slice(&last);
        assert!(bytes0 == expect0, "segment 0 contents differ");

        let bytes1 = fs::read(&seg1).unwrap();
        let mut expect1 = vec![0u8; SEG as usize];
        expect1[8192..8192 + in_seg1.len()].copy_from_slice(&in_seg1);
        assert!(bytes1 == expect1, "segment 1 contents differ");

        assert_eq!(
            segment_files(&dir),
            ["000000010000000000000000", "000000010000000000000001"]
        );
    }

    #[test]
    fn flush_syncs_earlier_segments_written_since_the_last_flush() {
        let mut dev = FileDevice::temp(SEG).unwrap();
        dev.write(SEG - 8, &[7u8; 8]).unwrap();
        dev.write(SEG, &[8u8; 8]).unwrap();
        dev.write(2 * SEG, &[9u8; 8]).unwrap();
        assert_eq!(
            dev.unsynced.iter().map(|s| s.segno).collect::<Vec<_>>(),
            [0, 1]
        );
        dev.flush(2 * SEG + 8).unwrap();
        assert!(dev.unsynced.is_empty());
        assert!(!dev.current.as_ref().unwrap().dirty);
        // A flush with nothing written since is a no-op, and succeeds.
        dev.flush(2 * SEG + 8).unwrap();
    }

    #[test]
    fn writes_crossing_a_segment_boundary_are_refused() {
        let mut dev = FileDevice::temp(SEG).unwrap();
        match dev.write(SEG - 8, &[0u8; 16]) {
            Err(DeviceError::CrossesSegment {
                lsn,
                len,
                segment_size,
            }) => {
                assert_eq!((lsn, len, segment_size), (SEG - 8, 16, SEG));
            }
            other => panic!("expected CrossesSegment, got {other:?}"),
        }
        // A caller error, not an I/O failure: the device is still usable.
        dev.write(SEG - 8, &[0u8; 8]).unwrap();
        dev.flush(SEG).unwrap();
    }

    #[test]
    fn old_segments_are_recycled_by_renaming() {
        let mut dev = FileDevice::temp(SEG).unwrap().with_keep_segments(2);
        let dir = dev.dir().to_path_buf();
        let mut inodes = Vec::new();
        for segno in 0..6u64 {
            let data = pattern(XLOG_BLCKSZ, segno as u8);
            dev.write(segno * SEG, &data).unwrap();
            dev.flush((segno + 1) * SEG).unwrap();
            let path = dir.join(FileDevice::segment_file_name(segno, SEG));
            inodes.push(fs::metadata(&path).unwrap().ino());
        }
        // 0, 1, 2 created; 3, 4, 5 are 0, 1, 2 renamed.
        assert_eq!(dev.segments_created(), 3);
        assert_eq!(dev.segments_recycled(), 3);
        assert_eq!(dev.segments_removed(), 0);
        assert_eq!(
            &inodes[3..],
            &inodes[..3],
            "recycled files are the old inodes"
        );
        assert_eq!(
            segment_files(&dir),
            [
                "000000010000000000000003",
                "000000010000000000000004",
                "000000010000000000000005"
            ],
            "two old segments kept, no temporary file left"
        );
        // A recycled segment keeps its old contents where not overwritten (as
        // in PostgreSQL), and has the new bytes where written.
        let seg3 = fs::read(dir.join("000000010000000000000003")).unwrap();
        assert_eq!(seg3.len() as u64, SEG);
        assert_eq!(&seg3[..XLOG_BLCKSZ], &pattern(XLOG_BLCKSZ, 3)[..]);
    }

    #[test]
    fn unflushed_segments_are_not_recycled() {
        let mut dev = FileDevice::temp(SEG).unwrap().with_keep_segments(0);
        let dir = dev.dir().to_path_buf();
        dev.write(0, &[1u8; 8]).unwrap();
        // Switch without a flush: segment 0 must survive.
        dev.write(SEG, &[2u8; 8]).unwrap();
        assert_eq!(dev.segments_created(), 2);
        assert_eq!(dev.segments_recycled(), 0);
        dev.flush(SEG + 8).unwrap();
        // Now 0 and 1 are clean: 0 is recycled into 2, 1 is surplus.
        dev.write(2 * SEG, &[3u8; 8]).unwrap();
        dev.flush(2 * SEG + 8).unwrap();
        assert_eq!(dev.segments_created(), 2);
        assert_eq!(dev.segments_recycled(), 1);
        assert_eq!(dev.segments_removed(), 1);
        assert_eq!(segment_files(&dir), ["000000010000000000000002"]);
        let seg2 = fs::read(dir.join("000000010000000000000002")).unwrap();
        assert_eq!(&seg2[..8], &[3u8; 8]);
    }

    #[test]
    fn create_uses_an_existing_directory_and_keeps_it() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("pg_wal");
        {
            let mut dev = FileDevice::create(&dir, SEG).unwrap();
            assert_eq!(dev.dir(), dir);
            dev.write(16, &[5u8; 8]).unwrap();
            dev.flush(24).unwrap();
        }
        assert_eq!(segment_files(&dir), ["000000010000000000000000"]);
        // Reopening uses the existing first segment (XLogFileInit).
        let dev = FileDevice::create(&dir, SEG).unwrap();
        assert_eq!(dev.segments_created(), 0);
        let bytes = fs::read(dir.join("000000010000000000000000")).unwrap();
        assert_eq!(&bytes[16..24], &[5u8; 8]);
    }

    #[test]
    fn temp_directory_is_removed_on_drop() {
        let dev = FileDevice::temp(SEG).unwrap();
        let dir = dev.dir().to_path_buf();
        assert!(dir.is_dir());
        drop(dev);
        assert!(!dir.exists());
    }

    #[test]
    fn a_failed_device_refuses_further_calls() {
        let mut dev = FileDevice::temp(SEG).unwrap();
        fs::remove_dir_all(dev.dir()).unwrap();
        // The switch to segment 1 cannot create its file.
        match dev.write(SEG, &[0u8; 8]) {
            Err(DeviceError::Create { path, .. }) => {
                assert!(path.ends_with(format!("xlogtemp.{}", std::process::id())));
            }
            other => panic!("expected Create, got {other:?}"),
        }
        assert!(matches!(dev.flush(SEG), Err(DeviceError::Failed(_))));
        assert!(matches!(
            dev.write(0, &[0u8; 8]),
            Err(DeviceError::Failed(_))
        ));
    }
}
