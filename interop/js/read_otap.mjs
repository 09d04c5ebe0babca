// Reads an OTAP envelope file with protobufjs and Apache Arrow JS and prints it as JSON.
//
//   node interop/js/read_otap.mjs FILE arrow_service.proto
//
// FILE: repeated u32 little-endian length + one serialized BatchArrowRecords (docs/formats.md,
// "OTAP envelope files"). Payload records are grouped by schema_id in arrival order; each
// schema_id's concatenated bytes are one Arrow IPC stream, whose k-th record batch belongs to
// the k-th payload of that schema_id. tests/test_interop_js.py builds the same JSON with pyarrow.
//
// Compressed IPC bodies (our default, zstd) are decoded with the pure-JS fzstd, registered as
// Arrow JS's ZSTD codec (decode only); LZ4_FRAME bodies have no codec here and fail loudly.
//
// Values: integers (any width), timestamps and durations (integer in the column's unit) as
// decimal strings; binary and fixed-size binary as lowercase hex; floats as numbers, with NaN,
// Infinity, -Infinity and -0 as strings; dictionaries decoded; structs as objects; lists as arrays.
import { readFileSync } from 'node:fs';
import protobuf from 'protobufjs';
import { compressionRegistry, CompressionType, tableFromIPC, Type } from 'apache-arrow';
import { decompress } from 'fzstd';

const [file, proto] = process.argv.slice(2);
if (!file || !proto) {
  console.error('usage: node read_otap.mjs FILE arrow_service.proto');
  process.exit(2);
}
// decode only: an encode here would be run at once by set()'s validator, and nothing here writes
compressionRegistry.set(CompressionType.ZSTD, {
  // copy: fzstd's output can be a view at an unaligned byteOffset, and Arrow JS then fails building BigInt64Array etc.
  decode: (data) => new Uint8Array(decompress(data)),
});
const BatchArrowRecords = protobuf.loadSync(proto)
  .lookupType('opentelemetry.proto.experimental.arrow.v1.BatchArrowRecords');

// 1. Envelopes: u32 LE length + message, until the end of the file.
const bytes = readFileSync(file);
const envelopes = [];
for (let pos = 0; pos < bytes.length;) {
  if (pos + 4 > bytes.length) throw new Error(`truncated length prefix at offset ${pos}`);
  const length = bytes.readUInt32LE(pos);
  if (pos + 4 + length > bytes.length) throw new Error(`truncated message at offset ${pos}`);
  const message = BatchArrowRecords.decode(bytes.subarray(pos + 4, pos + 4 + length));
  envelopes.push(BatchArrowRecords.toObject(message, { longs: String, enums: Number, defaults: true }));
  pos += 4 + length;
}

// 2. One IPC stream per schema_id: its payloads' records concatenated in arrival order.
const records = new Map();
for (const envelope of envelopes) {
  for (const payload of envelope.arrowPayloads) {
    if (!records.has(payload.schemaId)) records.set(payload.schemaId, []);
    records.get(payload.schemaId).push(payload.record);
  }
}
const tables = new Map();
for (const [schemaId, parts] of records) {
  const table = tableFromIPC(new Uint8Array(Buffer.concat(parts)));
  if (table.batches.length !== parts.length) {
    throw new Error(`schema_id ${schemaId}: ${parts.length} payloads but ${table.batches.length} record batches`);
  }
  tables.set(schemaId, table);
}

// 3. Values.
const hex = (u8) => Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString('hex');
const float = (x) => (Number.isFinite(x) ? (Object.is(x, -0) ? '-0' : x) : String(x));

// The chunk of a (possibly multi-chunk: dictionary deltas) vector holding row i, and i within it.
function locate(vector, i) {
  for (const data of vector.data) {
    if (i < data.length) return [data, i];
    i -= data.length;
  }
  throw new Error(`row ${i} past the end of a vector`);
}

function cell(vector, i) {
  if (!vector.isValid(i)) return null;
  const type = vector.type;
  switch (type.typeId) {
    case Type.Dictionary: {
      const [data, j] = locate(vector, i);
      return cell(data.dictionary, Number(data.values[j]));
    }
    case Type.Timestamp: // the getter returns epoch milliseconds as a float: read the stored integer
    case Type.Duration: {
      const [data, j] = locate(vector, i);
      return String(data.values[j]);
    }
    case Type.Int: return String(vector.get(i));
    case Type.Float: return float(vector.get(i));
    case Type.Bool:
    case Type.Utf8:
    case Type.LargeUtf8: return vector.get(i);
    case Type.Binary:
    case Type.LargeBinary:
    case Type.FixedSizeBinary: return hex(vector.get(i));
    case Type.Struct:
      return Object.fromEntries(type.children.map((f) => [f.name, cell(vector.getChild(f.name), i)]));
    case Type.List: {
      const items = vector.get(i);
      return Array.from({ length: items.length }, (_, k) => cell(items, k));
    }
    default: throw new Error(`unsupported Arrow type ${type}`);
  }
}

function rows(batch) {
  const columns = batch.schema.fields.map((f, c) => [f.name, batch.getChildAt(c)]);
  return Array.from({ length: batch.numRows },
    (_, i) => Object.fromEntries(columns.map(([name, vector]) => [name, cell(vector, i)])));
}

// 4. Schemas: name, type (Arrow JS's type name; structs and lists list their children), nullability, metadata.
function field(f) {
  const nested = f.type.typeId === Type.Struct || f.type.typeId === Type.List;
  const out = {
    name: f.name,
    type: nested ? Type[f.type.typeId] : String(f.type) + (f.type.isOrdered ? ' ordered' : ''),
    nullable: f.nullable,
    metadata: Object.fromEntries(f.metadata),
  };
  if (nested) out.children = f.type.children.map(field);
  return out;
}

const seen = new Map();
const output = {
  envelopes: envelopes.map((envelope) => ({
    batch_id: envelope.batchId,
    payloads: envelope.arrowPayloads.map((payload) => {
      const k = seen.get(payload.schemaId) ?? 0;
      seen.set(payload.schemaId, k + 1);
      return { schema_id: payload.schemaId, type: payload.type, rows: rows(tables.get(payload.schemaId).batches[k]) };
    }),
  })),
  schemas: [...tables].map(([schemaId, table]) => ({
    schema_id: schemaId,
    fields: table.schema.fields.map(field),
    metadata: Object.fromEntries(table.schema.metadata),
  })),
};
process.stdout.write(JSON.stringify(output));
