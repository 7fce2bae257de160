// Lets @modelcontextprotocol/conformance 0.1.x run on Node 20: it imports fs.globSync (Node 22+),
// which it uses only to find checks.json files under a results folder. This hook swaps that one
// import for a small recursive search. Loaded with: node --import ./node20_register.mjs ...
export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context);
  if (!url.includes("@modelcontextprotocol/conformance/dist/") || result.format !== "module") {
    return result;
  }
  let source = typeof result.source === "string" ? result.source : Buffer.from(result.source).toString("utf8");
  if (!source.includes("globSync as o,")) {
    return result;
  }
  source = source.replace("globSync as o,", "");
  const polyfill =
    'import {readdirSync as __readdir} from "fs";' +
    "const o=(pattern,options={})=>{const base=(options.cwd||\".\");const name=pattern.split(\"/\").pop();" +
    "const found=[];const walk=(dir,rel)=>{for(const entry of __readdir(dir,{withFileTypes:true})){" +
    "const path=rel?rel+\"/\"+entry.name:entry.name;if(entry.isDirectory()){walk(dir+\"/\"+entry.name,path)}" +
    "else if(entry.name===name){found.push(path)}}};walk(base,\"\");return found};";
  const shebang = source.startsWith("#!") ? source.slice(0, source.indexOf("\n") + 1) : "";
  return { ...result, source: shebang + polyfill + "\n" + source.slice(shebang.length) };
}
