//! NVRTC, loaded from the file [`NvrtcSearch`] ranks first among those that load, and the
//! compilation of the kernel program with it.
//!
//! cudarc's bindings only try fixed library names (`libnvrtc.so`, `libnvrtc.so.12`, …) on the
//! loader's path, which misses CUDA 13 (`libnvrtc.so.13`) and every NVRTC outside
//! `LD_LIBRARY_PATH`, and cannot be told which file to use. The handful of NVRTC functions the
//! kernels need are therefore bound here from an explicit path, and the loaded file is
//! reported (`GpuInfo::nvrtc`, shown by `--verbose`).

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::CudaError;
use crate::nvrtc_search::NvrtcSearch;

type Program = *mut c_void;
type Status = c_int;

type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> Status;
type CreateFn = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> Status;
type CompileFn = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> Status;
type SizeFn = unsafe extern "C" fn(Program, *mut usize) -> Status;
type BytesFn = unsafe extern "C" fn(Program, *mut c_char) -> Status;
type DestroyFn = unsafe extern "C" fn(*mut Program) -> Status;
type ErrorStringFn = unsafe extern "C" fn(Status) -> *const c_char;

/// The NVRTC functions the kernel compilation calls.
struct Functions {
    create: CreateFn,
    compile: CompileFn,
    log_size: SizeFn,
    log: BytesFn,
    cubin_size: SizeFn,
    cubin: BytesFn,
    destroy: DestroyFn,
    error_string: ErrorStringFn,
}

/// A loaded NVRTC library.
pub struct Nvrtc {
    functions: Functions,
    path: PathBuf,
    version: (i32, i32),
    /// Keeps the functions above valid; dropped last.
    _library: libloading::Library,
}

impl fmt::Display for Nvrtc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor) = self.version;
        write!(f, "NVRTC {major}.{minor} ({})", self.path.display())
    }
}

impl fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Nvrtc {
    /// Loads the best NVRTC `search` finds for a driver of CUDA major version `driver_major`
    /// (`None` when there is no driver: the newest).
    pub fn find(search: &NvrtcSearch, driver_major: Option<u32>) -> Result<Self, CudaError> {
        let mut refused = Vec::new();
        for candidate in search.candidates(driver_major) {
            match Self::open(&candidate.path) {
                Ok(nvrtc) => return Ok(nvrtc),
                // A bare name the loader does not know is the common case, not worth a line.
                Err(why) if candidate.path.components().count() > 1 => {
                    refused.push(format!("{}: {why}", candidate.path.display()));
                }
                Err(_) => {}
            }
        }
        let folders: Vec<String> = search
            .folders()
            .iter()
            .map(|f| f.display().to_string())
            .collect();
        let mut searched = format!(
            "libnvrtc.so.13, libnvrtc.so.12 or libnvrtc.so in {} or on the system loader's path",
            folders.join(", ")
        );
        if !refused.is_empty() {
            searched.push_str(&format!(" (found but unusable: {})", refused.join("; ")));
        }
        Err(CudaError::NoNvrtc { searched })
    }

    /// Loads NVRTC from `path` (a bare file name goes through the system loader's search).
    pub fn open(path: &Path) -> Result<Self, String> {
        // SAFETY: loading NVRTC runs only its own and the C++ runtime's initialisers.
        let library = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
        let version: VersionFn = symbol(&library, b"nvrtcVersion\0")?;
        let functions = Functions {
            create: symbol(&library, b"nvrtcCreateProgram\0")?,
            compile: symbol(&library, b"nvrtcCompileProgram\0")?,
            log_size: symbol(&library, b"nvrtcGetProgramLogSize\0")?,
            log: symbol(&library, b"nvrtcGetProgramLog\0")?,
            cubin_size: symbol(&library, b"nvrtcGetCUBINSize\0")?,
            cubin: symbol(&library, b"nvrtcGetCUBIN\0")?,
            destroy: symbol(&library, b"nvrtcDestroyProgram\0")?,
            error_string: symbol(&library, b"nvrtcGetErrorString\0")?,
        };
        let (mut major, mut minor) = (0, 0);
        // SAFETY: `version` has NVRTC's signature and writes two ints.
        let status = unsafe { version(&mut major, &mut minor) };
        if status != 0 {
            return Err(format!("nvrtcVersion failed ({status})"));
        }
        Ok(Self {
            functions,
            path: path.to_path_buf(),
            version: (major, minor),
            _library: library,
        })
    }

    /// The file loaded.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// NVRTC's (major, minor) version.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// Compiles `source` to a CUBIN for compute capability `arch` (e.g. `(9, 0)`).
    pub fn compile(&self, source: &str, arch: (u32, u32)) -> Result<Vec<u8>, CudaError> {
        let arch_name = format!("sm_{}{}", arch.0, arch.1);
        let fail = |log: String| CudaError::Compile {
            arch: arch_name.clone(),
            log,
        };
        let source = CString::new(source)
            .map_err(|_| fail("the kernel source contains a NUL byte".into()))?;
        let options: Vec<CString> = std::iter::once(format!("--gpu-architecture={arch_name}"))
            .chain(crate::kernels::NVRTC_OPTIONS.map(String::from))
            .map(|o| CString::new(o).expect("options have no NUL byte"))
            .collect();
        let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let f = &self.functions;
        let mut program: Program = std::ptr::null_mut();
        // SAFETY: `create` has NVRTC's signature; the source and name are NUL-terminated and
        // outlive the call; no headers are passed.
        let status = unsafe {
            (f.create)(
                &mut program,
                source.as_ptr(),
                c"rinfer_kernels.cu".as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        if status != 0 {
            return Err(fail(self.message("nvrtcCreateProgram", status)));
        }
        // SAFETY: `program` was created above; the options are live NUL-terminated strings.
        let status =
            unsafe { (f.compile)(program, option_ptrs.len() as c_int, option_ptrs.as_ptr()) };
        let result = if status != 0 {
            // SAFETY: `program` is live.
            let log = unsafe { self.bytes(program, f.log_size, f.log) }.unwrap_or_default();
            Err(fail(format!(
                "{}: {}",
                self.message("nvrtcCompileProgram", status),
                c_bytes_to_string(&log)
            )))
        } else {
            // SAFETY: `program` is live and compiled.
            unsafe { self.bytes(program, f.cubin_size, f.cubin) }
                .map_err(|status| fail(self.message("nvrtcGetCUBIN", status)))
        };
        // SAFETY: `program` is live and not used after this.
        unsafe { (f.destroy)(&mut program) };
        result
    }

    /// The bytes of a program's log or CUBIN, through its size and copy functions.
    ///
    /// # Safety
    /// `program` must be live (and compiled, for the CUBIN).
    unsafe fn bytes(
        &self,
        program: Program,
        size: SizeFn,
        copy: BytesFn,
    ) -> Result<Vec<u8>, Status> {
        let mut len = 0usize;
        // SAFETY: `program` is live (the caller's contract) and `len` a valid out-pointer.
        let status = unsafe { size(program, &mut len) };
        if status != 0 {
            return Err(status);
        }
        let mut data = vec![0u8; len];
        // SAFETY: `data` holds the `len` bytes NVRTC reported.
        let status = unsafe { copy(program, data.as_mut_ptr().cast::<c_char>()) };
        if status != 0 {
            return Err(status);
        }
        Ok(data)
    }

    /// `"<call>: <NVRTC's name for status>"`.
    fn message(&self, call: &str, status: Status) -> String {
        // SAFETY: NVRTC returns a static NUL-terminated string for any status (or null).
        let text = unsafe { (self.functions.error_string)(status) };
        let text = if text.is_null() {
            format!("error {status}")
        } else {
            // SAFETY: non-null, NUL-terminated and static (NVRTC's contract).
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        };
        format!("{call}: {text}")
    }
}

/// The function `name` of `library`, copied out as a plain function pointer (valid while the
/// library stays loaded, which [`Nvrtc`] guarantees by owning it).
fn symbol<T: Copy>(library: &libloading::Library, name: &[u8]) -> Result<T, String> {
    // SAFETY: every `T` used above is the C signature NVRTC declares for `name`.
    unsafe { library.get::<T>(name) }
        .map(|s| *s)
        .map_err(|e| e.to_string())
}

fn c_bytes_to_string(bytes: &[u8]) -> String {
    CStr::from_bytes_until_nul(bytes)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from_utf8_lossy(bytes).into_owned())
}
