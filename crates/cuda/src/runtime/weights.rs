//! Uploading a model's weights once, in their stored block formats.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::error::CudaError;
use crate::host::HostModel;
use crate::program::{WeightAddresses, place_weights};
use crate::runtime::driver::driver;

/// The device address of a buffer.
pub(crate) fn address<T>(buffer: &CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    let (ptr, _no_event) = buffer.device_ptr(stream);
    ptr
}

/// Every weight in device memory, and where each is.
pub(crate) struct DeviceWeights {
    _matrices: Vec<CudaSlice<u8>>,
    _vectors: Vec<CudaSlice<f32>>,
    pub addresses: WeightAddresses,
}

/// Uploads every weight of `model` (already validated by an [`UploadPlan`]).
///
/// [`UploadPlan`]: crate::UploadPlan
pub(crate) fn upload(
    model: &HostModel<'_>,
    stream: &Arc<CudaStream>,
) -> Result<DeviceWeights, CudaError> {
    let mut matrices = Vec::new();
    let mut vectors = Vec::new();
    let addresses = place_weights(
        model,
        |bytes| {
            let buffer = stream.clone_htod(bytes).map_err(driver("weight upload"))?;
            let ptr = address(&buffer, stream);
            matrices.push(buffer);
            Ok(ptr)
        },
        |floats| {
            let buffer = stream.clone_htod(floats).map_err(driver("weight upload"))?;
            let ptr = address(&buffer, stream);
            vectors.push(buffer);
            Ok(ptr)
        },
    )?;
    Ok(DeviceWeights {
        _matrices: matrices,
        _vectors: vectors,
        addresses,
    })
}
