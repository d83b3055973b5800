package cdclake.iceberg;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.inmemory.InMemoryInputFile;
import org.apache.iceberg.io.BulkDeletionFailureException;
import org.apache.iceberg.io.DelegateFileIO;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.io.FileInfo;
import org.apache.iceberg.io.InputFile;
import org.apache.iceberg.io.OutputFile;
import org.apache.iceberg.io.PositionOutputStream;
import org.apache.iceberg.io.SupportsBulkOperations;
import org.apache.iceberg.io.SupportsPrefixOperations;
import org.apache.iceberg.util.SerializableMap;

/**
 * The lake's FileIO: S3FileIO (or the class {@code cdc-lake.delegate-io-impl} names), which also keeps in the JVM's
 * memory the table metadata files this process wrote, and serves them to its own reads of them.
 *
 * <p>A warm run is its tables' only writer, and Iceberg reads back what it just wrote: the metadata.json of its
 * last commit (the next commit's refresh), the manifest list of its last snapshot (the next snapshot's base) and
 * the one it has just written (the cleanup after a commit). On S3 each is a HEAD or a GET, one after the other,
 * about a sixth of a small batch in-Region.
 *
 * <p>Only names Iceberg makes unique to one write are kept (a snapshot's manifest list, a commit's manifests, a
 * metadata.json with its UUID): such a file is never written again with other bytes, so what is kept is what S3
 * holds, or held before a removal. A file this FileIO removes is forgotten. The files kept take at most
 * {@link #MOST_BYTES} bytes in a JVM, the least recently used going first; a file over {@link #MOST_FILE_BYTES} is
 * not kept.
 */
public class WrittenMetadataFileIO implements DelegateFileIO {
  private static final long serialVersionUID = 1L;
  public static final String DELEGATE_IMPL = "cdc-lake.delegate-io-impl";
  static final String DEFAULT_DELEGATE = "org.apache.iceberg.aws.s3.S3FileIO";
  public static final long MOST_BYTES = 64L << 20;
  public static final int MOST_FILE_BYTES = 8 << 20;

  private static final String UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
  private static final Pattern WRITTEN_ONCE =
      Pattern.compile(
          ".*/metadata/(snap-\\d+-\\d+-"
              + UUID
              + "\\.avro|"
              + UUID
              + "-m\\d+\\.avro|\\d+-"
              + UUID
              + "\\.metadata\\.json)");

  private static final LinkedHashMap<String, byte[]> KEPT = new LinkedHashMap<>(64, 0.75f, true);
  private static long keptBytes = 0;

  private FileIO delegate;
  private SerializableMap<String, String> properties;

  public WrittenMetadataFileIO() {}

  @Override
  public void initialize(Map<String, String> newProperties) {
    this.properties = SerializableMap.copyOf(newProperties);
    String impl = newProperties.getOrDefault(DELEGATE_IMPL, DEFAULT_DELEGATE);
    this.delegate = CatalogUtil.loadFileIO(impl, newProperties, null);
  }

  @Override
  public Map<String, String> properties() {
    return properties.immutableMap();
  }

  @Override
  public InputFile newInputFile(String path) {
    byte[] kept = kept(path);
    return kept != null ? new InMemoryInputFile(path, kept) : delegate.newInputFile(path);
  }

  @Override
  public InputFile newInputFile(String path, long length) {
    byte[] kept = kept(path);
    return kept != null ? new InMemoryInputFile(path, kept) : delegate.newInputFile(path, length);
  }

  @Override
  public OutputFile newOutputFile(String path) {
    OutputFile file = delegate.newOutputFile(path);
    return WRITTEN_ONCE.matcher(path).matches() ? new KeepingOutputFile(file) : file;
  }

  @Override
  public void deleteFile(String path) {
    forget(path);
    delegate.deleteFile(path);
  }

  @Override
  public void deleteFiles(Iterable<String> paths) throws BulkDeletionFailureException {
    for (String path : paths) {
      forget(path);
    }
    bulk().deleteFiles(paths);
  }

  @Override
  public Iterable<FileInfo> listPrefix(String prefix) {
    return prefixed().listPrefix(prefix);
  }

  @Override
  public void deletePrefix(String prefix) {
    List<String> under;
    synchronized (KEPT) {
      under = KEPT.keySet().stream().filter(path -> path.startsWith(prefix)).toList();
    }
    under.forEach(WrittenMetadataFileIO::forget);
    prefixed().deletePrefix(prefix);
  }

  @Override
  public void close() {
    if (delegate != null) {
      delegate.close();
    }
  }

  /** How many files, and bytes, this JVM keeps. */
  public static long[] keptSize() {
    synchronized (KEPT) {
      return new long[] {KEPT.size(), keptBytes};
    }
  }

  /** Whether ``path`` is kept. */
  public static boolean isKept(String path) {
    synchronized (KEPT) {
      return KEPT.containsKey(path);
    }
  }

  private SupportsBulkOperations bulk() {
    if (!(delegate instanceof SupportsBulkOperations)) {
      throw new UnsupportedOperationException(delegate.getClass().getName() + " deletes no files in bulk");
    }
    return (SupportsBulkOperations) delegate;
  }

  private SupportsPrefixOperations prefixed() {
    if (!(delegate instanceof SupportsPrefixOperations)) {
      throw new UnsupportedOperationException(delegate.getClass().getName() + " lists no prefix");
    }
    return (SupportsPrefixOperations) delegate;
  }

  private static byte[] kept(String path) {
    synchronized (KEPT) {
      return KEPT.get(path);
    }
  }

  private static void keep(String path, byte[] bytes) {
    synchronized (KEPT) {
      byte[] previous = KEPT.put(path, bytes);
      keptBytes += bytes.length - (previous == null ? 0 : previous.length);
      Iterator<byte[]> oldest = KEPT.values().iterator();
      while (keptBytes > MOST_BYTES && oldest.hasNext()) {
        keptBytes -= oldest.next().length;
        oldest.remove();
      }
    }
  }

  private static void forget(String path) {
    synchronized (KEPT) {
      byte[] previous = KEPT.remove(path);
      if (previous != null) {
        keptBytes -= previous.length;
      }
    }
  }

  private final class KeepingOutputFile implements OutputFile {
    private final OutputFile file;

    KeepingOutputFile(OutputFile file) {
      this.file = file;
    }

    @Override
    public PositionOutputStream create() {
      return new KeepingStream(file.location(), file.create());
    }

    @Override
    public PositionOutputStream createOrOverwrite() {
      return new KeepingStream(file.location(), file.createOrOverwrite());
    }

    @Override
    public String location() {
      return file.location();
    }

    @Override
    public InputFile toInputFile() {
      return newInputFile(file.location());
    }
  }

  /** Writes through, and keeps a copy once the write is whole (its close returned). */
  private static final class KeepingStream extends PositionOutputStream {
    private final String path;
    private final PositionOutputStream stream;
    private ByteArrayOutputStream copy = new ByteArrayOutputStream();

    KeepingStream(String path, PositionOutputStream stream) {
      this.path = path;
      this.stream = stream;
    }

    @Override
    public long getPos() throws IOException {
      return stream.getPos();
    }

    @Override
    public long storedLength() throws IOException {
      return stream.storedLength();
    }

    @Override
    public void write(int b) throws IOException {
      stream.write(b);
      if (copy != null) {
        copy.write(b);
        bounded();
      }
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      stream.write(b, off, len);
      if (copy != null) {
        copy.write(b, off, len);
        bounded();
      }
    }

    @Override
    public void flush() throws IOException {
      stream.flush();
    }

    @Override
    public void close() throws IOException {
      ByteArrayOutputStream whole = copy;
      copy = null;
      stream.close();
      if (whole != null) {
        keep(path, whole.toByteArray());
      }
    }

    private void bounded() {
      if (copy.size() > MOST_FILE_BYTES) {
        copy = null;
      }
    }
  }
}
