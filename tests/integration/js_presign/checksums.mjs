// Stored checksums as the AWS SDK for JavaScript v3 uses them: PUTs in its
// default configuration and with each algorithm, multipart uploads of each
// checksum type, and GETs with ChecksumMode ENABLED, which the SDK itself
// validates against the bytes it receives (a wrong stored checksum fails the
// read). Prints, as JSON, what each call answered.
// usage: node checksums.mjs ENDPOINT BUCKET ACCESS_KEY SECRET PART_BYTES
import {
  S3Client, PutObjectCommand, GetObjectCommand, HeadObjectCommand, CreateMultipartUploadCommand,
  UploadPartCommand, CompleteMultipartUploadCommand, ListPartsCommand,
} from "@aws-sdk/client-s3";
import { createHash } from "node:crypto";

const [endpoint, bucket, accessKeyId, secretAccessKey, partBytes] = process.argv.slice(2);
const s3 = new S3Client({ endpoint, region: "us-east-1", forcePathStyle: true, credentials: { accessKeyId, secretAccessKey } });
const algorithms = ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"];
const bytes = (n, seed) => {
  const b = Buffer.alloc(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) { x = (Math.imul(x, 1103515245) + 12345) >>> 0; b[i] = x >>> 16; }
  return b;
};
const sha = (b) => createHash("sha256").update(b).digest("hex");
const checksums = (o) => Object.fromEntries(Object.entries(o).filter(([k, v]) => k.startsWith("Checksum") && v));
// GET with ChecksumMode ENABLED: the SDK checks the body against what the node returns.
const read = async (key, extra = {}) => {
  const r = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, ChecksumMode: "ENABLED", ...extra }));
  const body = Buffer.from(await r.Body.transformToByteArray());
  return { sha256: sha(body), checksums: checksums(r) };
};
const error = async (fn) => { try { await fn(); return null; } catch (e) { return e.Code || e.name || String(e); } };
const out = { puts: {}, multipart: {}, errors: {} };

const body = bytes(300_000, 7);
out.body_sha256 = sha(body);
for (const algorithm of [undefined, ...algorithms]) {
  const key = `put/${algorithm ?? "default"}`;
  const put = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ChecksumAlgorithm: algorithm }));
  const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key, ChecksumMode: "ENABLED" }));
  out.puts[algorithm ?? "default"] = { put: checksums(put), get: await read(key), head: checksums(head) };
}

const n = Number(partBytes);
const parts = [bytes(n, 1), bytes(n, 2), bytes(1234, 3)];
out.object_sha256 = sha(Buffer.concat(parts));
const uploads = [["CRC32", "COMPOSITE"], ["CRC32", "FULL_OBJECT"], ["CRC32C", "FULL_OBJECT"], ["CRC64NVME", "FULL_OBJECT"],
  ["SHA1", "COMPOSITE"], ["SHA256", "COMPOSITE"]];
for (const [algorithm, type] of uploads) {
  const key = `mpu/${algorithm}-${type}`;
  const created = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: algorithm, ChecksumType: type }));
  const done = [];
  for (let i = 0; i < parts.length; i++) {
    const p = await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: created.UploadId, PartNumber: i + 1,
      Body: parts[i], ChecksumAlgorithm: algorithm }));
    done.push({ PartNumber: i + 1, ETag: p.ETag, ...checksums(p) });
  }
  const listed = await s3.send(new ListPartsCommand({ Bucket: bucket, Key: key, UploadId: created.UploadId }));
  const complete = await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: created.UploadId,
    MultipartUpload: { Parts: done } }));
  out.multipart[`${algorithm}-${type}`] = {
    created: { algorithm: created.ChecksumAlgorithm, type: created.ChecksumType },
    parts: done.map(checksums),
    listed: { algorithm: listed.ChecksumAlgorithm, type: listed.ChecksumType, parts: listed.Parts.map(checksums) },
    complete: checksums(complete),
    get: await read(key),
    part2: await read(key, { PartNumber: 2 }),
  };
}

// What must be refused: a wrong checksum, a part list naming a wrong one, a type the algorithm cannot have.
out.errors.wrong_put = await error(() => s3.send(new PutObjectCommand({ Bucket: bucket, Key: "bad", Body: body, ChecksumCRC32: "AAAAAA==" })));
out.errors.sha256_full_object = await error(() => s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: "bad",
  ChecksumAlgorithm: "SHA256", ChecksumType: "FULL_OBJECT" })));
{
  const key = "mpu/wrong-part";
  const created = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: "CRC32" }));
  const p = await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: created.UploadId, PartNumber: 1,
    Body: parts[2], ChecksumAlgorithm: "CRC32" }));
  out.errors.wrong_part = await error(() => s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key,
    UploadId: created.UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: p.ETag, ChecksumCRC32: "AAAAAA==" }] } })));
}
process.stdout.write(JSON.stringify(out) + "\n");
